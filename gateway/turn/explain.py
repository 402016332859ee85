"""Why the assistant knows what it knows: the exact prompt a message would get, section by section.

``explain`` runs the real context stages and the budgeter for a message from a user on a channel,
without running the model and without writing anything (the session is peeked, not created; no
turn, no log, no job). ``kith context`` prints it, and the daemon serves it as ``POST /api/users/{uid}/context``
(``gateway/http/api/explain.py``) so the CLI sees the live memory index the daemon holds.
"""

from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.channels import CHANNEL_NAME
from gateway.llm.anthropic import api_messages, system_blocks
from gateway.memory.search.filter_tier import DECISION as FILTER_DECISION
from gateway.memory.search.readiness import RECALL_SKIPPED
from gateway.turn.budget import estimate_tokens, render_section
from gateway.turn.protocol import ASSEMBLED, build_request
from gateway.turn.tiers import tier_of
from gateway.types import ConversationKind, InboundMessage, Turn, UserRef

if TYPE_CHECKING:
    from gateway.services import Services


class ExplainError(ValueError):
    """Bad input to ``explain`` (unknown user...), shown to the operator as is."""


def _account(gateway: Services, user_id: str, channel: str) -> str:
    account = gateway.state.identities.account_on(user_id, channel)
    return account.account_id if account else user_id


async def explain(
    gateway: Services,
    *,
    user_id: str,
    channel: str,
    text: str,
    conversation: str = "",
    tier: int | None = None,
) -> dict[str, Any]:
    if not CHANNEL_NAME.fullmatch(channel):
        raise ExplainError(f"channel {channel!r} is not a channel's name (want {CHANNEL_NAME.pattern}, e.g. websocket)")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in conversation):
        raise ExplainError(f"conversation {conversation!r} holds control characters; no channel names one so")
    user = gateway.state.users.get(user_id)
    if user is None:
        raise ExplainError(f"unknown user {user_id!r} (see `kith memory stats` or the users table)")
    now = datetime.now(UTC)
    message = InboundMessage(
        channel=channel, account_id=_account(gateway, user_id, channel), text=text,
        conversation_id=conversation, kind=ConversationKind.GROUP if conversation else ConversationKind.DM,
        display_name=user.display_name, timestamp=now, trusted=True, mentioned=True,
    )
    turn = Turn(turn_id="explain-" + uuid.uuid4().hex, message=message, received_at=now, tier=tier,
                user=UserRef(user_id=user_id, display_name=user.display_name, timezone=user.timezone,
                             tier=user.tier))
    turn.session = gateway.sessions.peek(turn.user, message, now)  # type: ignore[arg-type]
    turn.history = gateway.sessions.history(turn.session)
    request = await build_request(gateway, turn)
    request = await gateway.hooks.before_llm_call(gateway, turn, request) or request
    assembled: Any = turn.stash[ASSEMBLED]
    trims = {t.source: t for t in assembled.trims}
    sections = []
    for i, s in enumerate(request.system):
        trim = trims.get(s.source)
        text = render_section(s)
        sections.append({
            "title": s.title, "source": s.source, "tokens": estimate_tokens(text),
            "stability": s.stability.value, "cached": i < int(request.metadata.get("stable_count", 0)),
            "priority": s.priority, "trim_rank": s.trim_rank, "protected": s.protected, "as_data": s.as_data,
            "trimmed_from": trim.before_tokens if trim else None, "text": text,
        })
    messages = [{"role": m["role"], "tokens": estimate_tokens(str(m["content"])), "content": m["content"]}
                for m in api_messages(request.messages)]
    return {
        "user": user_id, "channel": channel, "conversation": conversation, "tier": tier_of(gateway, turn),
        "session": {"id": turn.session.session_id, "new": turn.session.is_new, "otr": turn.session.otr},
        "budget_tokens": gateway.config.context.budget_tokens,
        "system_tokens": sum(s["tokens"] for s in sections),
        "message_tokens": sum(m["tokens"] for m in messages),
        "sections": sections,
        "trims": [{"source": t.source, "before": t.before_tokens, "after": t.after_tokens, "reason": t.reason}
                  for t in assembled.trims],
        "messages": messages,
        "tools": [t.name for t in request.tools],
        "recall_skipped": turn.stash.get(RECALL_SKIPPED),
        "recall_filter": decision.as_dict() if (decision := turn.stash.get(FILTER_DECISION)) else None,
        "system": system_blocks(request, caching=gateway.config.llm.prompt_caching),
    }
