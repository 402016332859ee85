"""The weekly memory hygiene's settings (``background.hygiene``; docs/memory.md#hygiene)."""

from __future__ import annotations

from pydantic import Field

from gateway.configtypes import Cron, ModelRole, Section


class HygieneConfig(Section):
    """Weekly memory hygiene (docs/memory.md): proposals the person accepts or rejects (/tidy, the console)."""

    enabled: bool = True
    cron: Cron = "0 5 * * 0"  # per user, in the user's timezone (Sundays 05:00)
    backend: ModelRole = "cheap"  # judges conflicting facts, stale beliefs and notes worth promoting
    use_model: bool = True  # False: only the deterministic checks (duplicate people files)
    max_proposals: int = Field(20, ge=1, le=200)  # pending at once per person
    stale_days: int = Field(365, ge=30)  # a dated belief older than this is shown to the model as possibly stale
