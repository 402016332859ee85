"""What the model saw for each stored turn: section names, token counts, what was trimmed.

The console's "what the assistant saw" page (``GET /api/users/{uid}/turns/{turn_id}/context``) reads
this record; ``kith context`` / ``gateway.turn.explain`` show the same for a message not yet sent. It is
written from ``gateway_after_turn``, which never runs for an Off-The-Record turn, so nothing about an
OTR turn is kept. The record holds sizes and names, not the prompt's text: the text lives on in the
person's files and transcript, and one small row per turn keeps the turn's cost tiny (the budgeter
has already measured every section; this adds one rendering pass for the token counts and one
INSERT). Records older than ``RETENTION`` are pruned every ``PRUNE_EVERY`` turns, a bounded batch at
a time.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from gateway.hookspecs import hookimpl
from gateway.memory.search.filter_tier import DECISION as FILTER_DECISION
from gateway.memory.search.readiness import RECALL_SKIPPED
from gateway.turn.budget import SECTION_SEPARATOR, Assembled, estimate_tokens, sent_tokens
from gateway.turn.protocol import ASSEMBLED
from gateway.turn.tiers import tier_of
from gateway.types import ContextSection, LLMResponse, Reply, StashKey, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.turncontext")

RETENTION = timedelta(days=30)
PRUNE_EVERY = 256
PRUNE_BATCH = 1000


@dataclass(slots=True)
class _Counter:
    turns: int = 0


COUNTER: StashKey[_Counter] = StashKey()


def _tokens(section: ContextSection) -> int:
    """``sent_tokens`` without rendering the text again: a plain section renders as a title line and
    its text (a data section quotes every line, so it is rendered)."""
    if section.as_data:
        return sent_tokens(section)
    # estimate_tokens of "--- {title} ---\n{text}" + the separator (tests/api/test_turn_context.py checks it)
    return (len(section.title) + 9 + len(section.text) + len(SECTION_SEPARATOR) + 3) // 4


def summary(gateway: Services, turn: Turn, assembled: Assembled) -> dict[str, Any]:
    """The record of one turn, as JSON-ready values."""
    cached = assembled.stable_count
    sections = [
        {"source": s.source, "title": s.title, "tokens": _tokens(s), "stability": s.stability.value,
         "cached": i < cached, "trim_rank": s.trim_rank, "protected": s.protected, "as_data": s.as_data}
        for i, s in enumerate(assembled.sections)
    ]  # fmt: skip
    return {
        "tier": tier_of(gateway, turn),
        "budget_tokens": gateway.config.context.budget_tokens,
        "system_tokens": assembled.total_tokens,
        "history_messages": len(turn.history),
        "history_tokens": sum(estimate_tokens(m.content) for m in turn.history),
        "message_tokens": estimate_tokens(turn.message.text),
        "sections": sections,
        "trims": [{"source": t.source, "before": t.before_tokens, "after": t.after_tokens, "reason": t.reason}
                  for t in assembled.trims],
        "persona": turn.session.persona if turn.session else "",
        "channel": turn.message.channel,
        "recall_skipped": turn.stash.get(RECALL_SKIPPED),
        "recall_filter": decision.as_dict() if (decision := turn.stash.get(FILTER_DECISION)) else None,
    }


def record(gateway: Services, turn: Turn) -> bool:
    """Store what the model saw for ``turn`` (False when there is nothing to store: no assembled
    prompt, no session, or an Off-The-Record turn)."""
    assembled = turn.stash.get(ASSEMBLED)
    session, user = turn.session, turn.user
    if not isinstance(assembled, Assembled) or session is None or user is None or session.otr:
        return False
    data = json.dumps(summary(gateway, turn, assembled), ensure_ascii=False, separators=(",", ":"))
    state = gateway.state
    state.turn_contexts.record(turn.turn_id, user_id=user.user_id, session_id=session.session_id,
                               at=turn.received_at, data=data)  # fmt: skip
    counter = gateway.stash.setdefault(COUNTER, _Counter())
    counter.turns += 1
    if counter.turns % PRUNE_EVERY == 0:
        state.turn_contexts.prune(datetime.now(UTC) - RETENTION, PRUNE_BATCH)
    return True


@hookimpl
async def gateway_after_turn(gateway: Services, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
    try:
        record(gateway, turn)
    except Exception:
        # A missing record costs the console one page; it must never cost the person their turn.
        log.exception("could not store the context record of turn %s", turn.turn_id)
