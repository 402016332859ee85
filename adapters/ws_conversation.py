"""What a WebSocket client shows about its conversation: the ``ready``/``state`` fields and the
``history`` replay of the current session (docs/protocol.md#state, #history).

Everything is read for the connection's own account: the session is the live one of the person's
direct scope, found as the next message would find it (``Sessions.peek``: nothing is created or
touched), so no frame can name another person's session. Off-The-Record turns live only in the
daemon's memory and are replayed only while that OTR session is live.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.turn.tiers import tier_of
from gateway.types import InboundMessage, Session, Turn, UserRef

if TYPE_CHECKING:
    from gateway.services import Services

PREVIEW = "preview-"  # Sessions.peek's stand-in id when the next message would start a session
MAX_HISTORY = 200
DEFAULT_HISTORY = 50


def _current(gateway: Services, user: UserRef, message: InboundMessage) -> Session | None:
    session = gateway.sessions.peek(user, message, datetime.now(UTC))
    return None if session.session_id.startswith(PREVIEW) else session


def conversation_state(gateway: Services, user: UserRef, message: InboundMessage) -> dict[str, Any]:
    """The fields of a ``state`` frame (and of ``ready``) for the account of ``message``."""
    session = gateway.sessions.peek(user, message, datetime.now(UTC))
    return {
        "session_id": None if session.session_id.startswith(PREVIEW) else session.session_id,
        "otr": session.otr,
        "persona": session.persona,
        "tier": tier_of(gateway, Turn(turn_id="", message=message, received_at=datetime.now(UTC), user=user)),
        "display_name": user.display_name,
    }


def accounts(gateway: Services, user_id: str) -> list[dict[str, str]]:
    return [{"channel": c, "account_id": a} for c, a in gateway.identities.accounts(user_id)]


@dataclass(frozen=True, slots=True)
class HistoryPage:
    session_id: str | None
    messages: list[dict[str, Any]]
    more: bool


def _entry(seq: int, role: str, text: str, at: datetime, turn_id: str) -> dict[str, Any]:
    return {"seq": seq, "role": role, "text": text, "at": at.astimezone(UTC).isoformat(), "turn_id": turn_id}


def history(gateway: Services, user: UserRef, message: InboundMessage, *, before_seq: int | None,
            limit: int) -> HistoryPage:  # fmt: skip
    """Up to ``limit`` messages of the current session before ``before_seq`` (default: its end), oldest
    first; ``more`` when older ones exist."""
    session = _current(gateway, user, message)
    if session is None:
        return HistoryPage(None, [], False)
    if session.otr:
        otr = gateway.sessions.otr.get(session.scope)
        # An OTR session has no stored seq: its messages count from 1, in the order they were said.
        rows = [_entry(i, h.role, h.content, h.timestamp, h.turn_id)
                for i, h in enumerate(otr.history if otr else (), start=1)
                if before_seq is None or i < before_seq]  # fmt: skip
        return HistoryPage(session.session_id, rows[-limit:], len(rows) > limit)
    stored = gateway.state.turns.page(session.session_id, before_seq=before_seq, limit=limit + 1)
    entries = [_entry(r.seq, r.role, r.content, r.created_at, r.turn_id) for r in stored]
    return HistoryPage(session.session_id, entries[-limit:], len(entries) > limit)
