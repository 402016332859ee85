"""The background stages' settings (``background:`` in config.yaml; docs/jobs.md): the memory
writer, the sleep cycle and its curation rails, distillation, retention, and (from its own package)
hygiene. Each stage reads its own section; the host's ``Config`` only places ``background``. Built on
``gateway.configtypes`` alone, so reading a config imports none of the stages' code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.configtypes import Cron, ModelRole, Section
from gateway.memory.hygiene.settings import HygieneConfig


class WriterConfig(Section):
    """Memory writer: session summaries, people/ and topics/ files (docs/memory.md)."""

    enabled: bool = True
    turn_threshold: int = Field(50, ge=1)  # unsummarised turns that trigger a run
    idle_seconds: float = Field(1800, ge=1)  # silence in a session that triggers a run
    on_session_end: bool = True  # a session ended by an idle gap or /new is summarised
    backend: ModelRole = "cheap"
    max_transcript_chars: int = Field(40_000, ge=1000)  # per run; the rest waits for the next run
    max_tokens: int = Field(2000, ge=100, le=64000)


class SleepConfig(Section):
    """Nightly sleep cycle: extraction into memories/, facts, USER.md curation (docs/knowledge.md)."""

    enabled: bool = True
    cron: Cron = "0 3 * * *"  # per user, in the user's timezone
    groups: bool = True  # also one cycle per group conversation
    group_cron: Cron = "30 3 * * *"  # in the gateway's timezone
    backend: ModelRole = "cheap"
    char_budget: int = Field(50_000, ge=2000)  # characters of the day's turns sent to the model
    interactive_share: float = Field(0.8, gt=0, le=1)  # of the budget, for direct conversations
    head_share: float = Field(0.4, ge=0, le=1)  # of a cut conversation, kept from its start
    automated_channels: list[str] = Field(default_factory=lambda: ["cron", "system", "briefing", "scheduled"])
    max_tokens: int = Field(4000, ge=100, le=64000)
    curate: bool = True  # end the night with USER.md curation by operations
    curation_backend: ModelRole = "cheap"
    # Seed 004: a one-line summary of each night's curation goes to the person's notification
    # conversation (their own setting, docs/proactive.md) and to this operator log conversation
    # ("<channel>:<conversation id>"), when either is set.
    curation_summary: bool = True
    # Seed 003: after a person's session is compacted, the durable facts of the compacted span go to
    # USER.md and PATTERNS.md at once, through the same ops and rails (one curation call), not at night.
    curate_after_compaction: bool = True
    curation_log_conversation: str | None = None


class RailsConfig(Section):
    """Code-enforced limits on one USER.md curation run."""

    max_ops: int = Field(20, ge=0)
    max_remove_fraction: float = Field(0.25, ge=0, le=1)
    allowed_sections: list[str] = Field(
        default_factory=lambda: ["Identity", "Work", "Preferences", "Communication", "People", "Projects",
                                 "Interests", "Health", "Routines", "Goals", "Notes"]
    )
    allow_new_sections: bool = False


class DistillTier(Section):
    enabled: bool = True
    cron: Cron = "0 3 * * *"  # per user, in the user's timezone
    backend: ModelRole = "cheap"  # ignored by the short tier (no model)
    budget_tokens: int = Field(2000, ge=100)


class DistillConfig(Section):
    """Distillation tiers MEMORY_SHORT / MID / LONG (docs/memory.md)."""

    short: DistillTier = Field(default_factory=lambda: DistillTier(cron="0 3 * * *", budget_tokens=3000))
    mid: DistillTier = Field(default_factory=lambda: DistillTier(cron="30 3 * * 0"))
    long: DistillTier = Field(default_factory=lambda: DistillTier(enabled=False, cron="0 4 1 * *", backend="main"))
    # Deprecated: the operator's copy of every notice; each person chooses their own (docs/proactive.md).
    notify_conversation: str | None = None  # conversation key, e.g. "telegram:12345"
    notify_tiers: list[Literal["short", "mid", "long"]] = Field(default_factory=lambda: ["mid", "long"])


class RetentionConfig(Section):
    memory_retention_days: int = Field(0, ge=0)  # 0 = keep forever; the profile is never pruned by age
    # Group and channel memory (seed 004: a retention of its own): None = memory_retention_days; 0 = forever.
    group_retention_days: int | None = Field(None, ge=0)
    cron: Cron = "15 4 * * *"  # per user, in the user's timezone

    @property
    def group_days(self) -> int:
        """Days a group conversation's dated memory is kept (0 = forever)."""
        return self.memory_retention_days if self.group_retention_days is None else self.group_retention_days


class AttentionNoticeConfig(Section):
    """The operator's notice about memory jobs that need attention, at most one a day
    (gateway/ops/attention_notice.py, docs/operations.md#the-operators-notice)."""

    enabled: bool = True
    user: str | None = None  # the operator's user id; unset: the local owner (docs/web.md#one-owner)
    cron: Cron = "*/15 * * * *"  # how often the dead letters and retries are looked at (gateway timezone)


class BackgroundConfig(Section):
    """What the assistant learns between conversations: every stage is a job (docs/jobs.md)."""

    writer: WriterConfig = Field(default_factory=WriterConfig)
    sleep: SleepConfig = Field(default_factory=SleepConfig)
    curation: RailsConfig = Field(default_factory=RailsConfig)
    distill: DistillConfig = Field(default_factory=DistillConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    hygiene: HygieneConfig = Field(default_factory=HygieneConfig)
    attention_notice: AttentionNoticeConfig = Field(default_factory=AttentionNoticeConfig)
    facts_in_prompt: bool = True  # relevant knowledge-graph facts join the system prompt
    max_prompt_facts: int = Field(20, ge=0, le=200)
