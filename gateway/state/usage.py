"""Model token use and cost per person, role and UTC day, as they cross the storage seam.

One row per (user, day, role, provider, model), added to on every model call; ``user_id`` is ``''``
for calls on no person's behalf (a group's background job). Cost is computed by the caller from the
role's configured prices (docs/models.md), so a price change never rewrites history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    user_id: str
    day: str  # YYYY-MM-DD, UTC
    role: str
    provider: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float


class UsageStore(Protocol):
    def add(self, *, user_id: str, day: str, role: str, provider: str, model: str, input_tokens: int,
            output_tokens: int, cache_read_tokens: int, cache_write_tokens: int, cost_usd: float) -> None: ...
    def rows(self, *, since_day: str, user_id: str | None = None) -> list[UsageRow]: ...  # newest day first
    def cost_on(self, user_id: str, day: str) -> float: ...  # every role's cost of the person that day
