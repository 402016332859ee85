"""What the assistant saw for a past turn: the record ``gateway.turn.record`` kept (sections with
their token counts, what the budgeter trimmed, the tier, the history's size). Off-The-Record turns and
turns older than the retention have none (404)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Call, Route


class SectionSeen(Answer):
    source: str
    title: str
    tokens: int
    stability: str
    cached: bool = Field(description="inside the prompt-cache prefix (stable sections)")
    trim_rank: int
    protected: bool
    as_data: bool


class TrimSeen(Answer):
    source: str
    before: int
    after: int
    reason: str


class FilterSeen(Answer):
    outcome: str = Field(description="used, timeout, error or off (docs/memory.md, the recall filter tier)")
    latency_ms: float
    candidates: int
    kept: list[str] = Field(description="chunk ids of the recalled memories in the prompt, in order")
    reason: str
    backend: str
    grep: str = Field("", description="the literal search the filter escalated to once (seed 001); '': none")


class TurnContextOut(Answer):
    turn_id: str
    session_id: str
    at: datetime
    tier: int
    budget_tokens: int
    system_tokens: int
    history_messages: int
    history_tokens: int
    message_tokens: int
    persona: str
    channel: str
    sections: list[SectionSeen]
    trims: list[TrimSeen]
    recall_filter: FilterSeen | None = Field(None, description="the recall filter tier's decision; null: no recall")
    recall_skipped: str | None = Field(None, description="why recall did not run although it was on (the memory"
                                       " index was still loading at start-up); null: it ran, or was off")


async def turn_context(call: Call) -> TurnContextOut:
    uid = call.user_id()
    turn_id = call.param("turn_id")
    found = call.gateway.state.turn_contexts.get(turn_id) if len(turn_id) <= 128 else None
    if found is None or found.user_id != uid:
        raise ApiError(404, "no record of that turn (Off-The-Record, too old, or not this person's)")
    data: dict[str, Any] = json.loads(found.data)
    return TurnContextOut.model_validate({**data, "turn_id": found.turn_id, "session_id": found.session_id,
                                          "at": found.created_at})  # fmt: skip


ROUTES = [
    Route("GET", "/api/users/{uid}/turns/{turn_id}/context", "what the model saw for a past turn", TurnContextOut,
          turn_context, tag="sessions"),
]
