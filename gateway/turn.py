"""The default turn protocol (``gateway_handle_turn``, trylast so a plugin can replace it).

Order, each step cheap before anything costs money:

1. ``gateway_filter_inbound``  drop bots, self, noise
2. access                      untrusted senders through ``gateway_check_access`` (deny by default)
3. dedupe                      (channel, platform message id), persisted after the turn
4. identity                    ``gateway_resolve_identity``
5. commands                    ``/new /otr /link /help /start`` via ``gateway_handle_command``
6. session                     idle gap -> new session, ``gateway_session_started``
7. context                     ``gateway_context_sections`` -> budgeter
8. LLM                         ``gateway_before_llm_call`` -> ``gateway_llm_call`` (streamed)
9. reply                       ``gateway_render_reply`` splits to the channel's limit
10. persist + after            transcript (never for OTR) -> ``gateway_after_turn``
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.context import assemble
from gateway.hookspecs import hookimpl
from gateway.llm.base import LLMError
from gateway.text import split_text
from gateway.tools import toolset
from gateway.types import (
    AccessDecision,
    ContextSection,
    Drop,
    HistoryMessage,
    LLMRequest,
    LLMResponse,
    Reply,
    StashKey,
    Turn,
)

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger("kith.turn")

ON_DELTA: StashKey[Callable[[str], Awaitable[None] | None]] = StashKey()
ASSEMBLED: StashKey[object] = StashKey()
GENERIC_ERROR = "Something went wrong while answering; the error is logged. Please try again."


def parse_command(text: str) -> tuple[str, str] | None:
    """``/cmd args`` -> ("cmd", "args"); ``/cmd@botname`` (Telegram groups) is accepted."""
    if not text.startswith("/") or len(text) < 2 or text[1] in "/ ":
        return None
    head, _, args = text[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    if not name.isascii() or not name.replace("_", "").isalnum():
        return None
    return name, args.strip()


async def collect_sections(gateway: Gateway, turn: Turn) -> list[ContextSection]:
    results = await gateway.hooks.call_all("gateway_context_sections", gateway=gateway, turn=turn)
    sections: list[ContextSection] = []
    for r in results:
        if isinstance(r, ContextSection):
            sections.append(r)
        else:
            sections.extend(s for s in r if isinstance(s, ContextSection))
    return sections


async def build_request(gateway: Gateway, turn: Turn) -> LLMRequest:
    sections = await collect_sections(gateway, turn)
    assembled = assemble(sections, gateway.config.context.budget_tokens)
    turn.stash[ASSEMBLED] = assembled
    user_msg = HistoryMessage(role="user", content=turn.message.text, timestamp=turn.received_at,
                              turn_id=turn.turn_id)
    tools = toolset(gateway, turn)  # offered by tier; none that write in OTR, none private in groups
    return LLMRequest(
        system=assembled.sections,
        messages=(*turn.history, user_msg),
        max_tokens=gateway.config.llm.max_tokens,
        metadata={"stable_count": assembled.stable_count},
        tools=tools.specs,
        run_tool=tools.run,
        max_tool_rounds=gateway.config.llm.max_tool_rounds,
    )


async def _admit(gateway: Gateway, turn: Turn) -> Reply | bool | None:
    """Steps 1-3. True = go on; a Reply or None = stop here."""
    msg = turn.message
    hooks = gateway.hooks
    drop = await hooks.call_first("gateway_filter_inbound", message=msg)
    if isinstance(drop, Drop):
        log.info("dropped %s message from %s: %s", msg.channel, msg.account_id, drop.reason)
        return None
    if not msg.trusted:
        decision = await hooks.call_first("gateway_check_access", gateway=gateway, message=msg)
        if isinstance(decision, Drop):
            log.info("access denied for %s:%s: %s", msg.channel, msg.account_id, decision.reason)
            return Reply(text=decision.reply, chunks=(decision.reply,), notice=True) if decision.reply else None
        if decision is not AccessDecision.ALLOW:
            log.info("access denied for %s:%s (no policy allowed it)", msg.channel, msg.account_id)
            return None
    if msg.message_id and not gateway.dedupe.claim(msg.channel, msg.message_id):
        log.info("duplicate %s message %s ignored", msg.channel, msg.message_id)
        return None
    return True


@hookimpl(trylast=True)
async def gateway_handle_turn(gateway: Gateway, turn: Turn) -> Reply | None:
    admitted = await _admit(gateway, turn)
    if admitted is not True:
        return admitted or None
    msg = turn.message
    hooks = gateway.hooks
    user = await hooks.call_first("gateway_resolve_identity", isolate=False, gateway=gateway, message=msg)
    if user is None:
        log.error("no plugin resolved an identity for %s:%s", msg.channel, msg.account_id)
        return None
    turn.user = user

    command = parse_command(msg.text)
    if command is not None:
        was_otr = gateway.sessions.is_otr(user, msg)
        answer = await hooks.call_first(
            "gateway_handle_command", gateway=gateway, turn=turn, command=command[0], args=command[1]
        )
        if isinstance(answer, Reply):
            # Commands entering or leaving Off-The-Record leave no trace either.
            if not was_otr and not gateway.sessions.is_otr(user, msg):
                gateway.dedupe.persist(msg.channel, msg.message_id)
            return await _render_notice(gateway, turn, answer)

    session = gateway.sessions.current(user, msg, turn.received_at)
    turn.session = session
    if session.is_new:
        await hooks.call_all("gateway_session_started", gateway=gateway, turn=turn, session=session)
    turn.history = gateway.sessions.history(session)

    response: LLMResponse | None = None
    try:
        request = await build_request(gateway, turn)
        replaced = await hooks.call_first("gateway_before_llm_call", gateway=gateway, turn=turn, request=request)
        if isinstance(replaced, LLMRequest):
            request = replaced
        response = await hooks.call_first(
            "gateway_llm_call", isolate=False, timeout=None,
            gateway=gateway, turn=turn, request=request, on_delta=turn.stash.get(ON_DELTA),
        )
        if response is None:
            raise LLMError("no plugin answered gateway_llm_call")
    except LLMError as exc:
        log.warning("model call failed for turn %s: %s", turn.turn_id, exc)
        await hooks.call_all("gateway_turn_error", gateway=gateway, turn=turn, error=exc)
        return await _render_notice(gateway, turn, Reply(text=exc.user_message, notice=True))
    except Exception as exc:
        log.exception("turn %s failed", turn.turn_id)
        await hooks.call_all("gateway_turn_error", gateway=gateway, turn=turn, error=exc)
        return await _render_notice(gateway, turn, Reply(text=GENERIC_ERROR, notice=True))

    reply = await hooks.call_first("gateway_render_reply", gateway=gateway, turn=turn, response=response)
    if not isinstance(reply, Reply):
        reply = default_render(gateway, turn, response.text)

    if not session.otr:
        gateway.dedupe.persist(msg.channel, msg.message_id)
    gateway.sessions.record(
        session, turn_id=turn.turn_id, user_text=msg.text, reply_text=reply.text, channel=msg.channel,
        speaker=msg.display_name or msg.account_id, at=turn.received_at, reply_at=datetime.now(UTC),
        user_id=user.user_id,
    )
    if not session.otr:
        gateway.remember_conversation(turn)
        await hooks.call_all("gateway_after_turn", gateway=gateway, turn=turn, reply=reply, response=response)
    return reply


def default_render(gateway: Gateway, turn: Turn, text: str, *, notice: bool = False) -> Reply:
    limit = gateway.message_limit(turn.message.channel)
    session = turn.session
    return Reply(
        text=text,
        chunks=tuple(split_text(text, limit)) or ("…",),
        turn_id=turn.turn_id,
        session_id=session.session_id if session else "",
        otr=bool(session and session.otr)
        or (turn.user is not None and gateway.sessions.is_otr(turn.user, turn.message)),
        notice=notice,
    )


async def _render_notice(gateway: Gateway, turn: Turn, answer: Reply) -> Reply:
    return default_render(gateway, turn, answer.text, notice=True)


@hookimpl(trylast=True)
def gateway_render_reply(gateway: Gateway, turn: Turn, response: LLMResponse) -> Reply:
    return default_render(gateway, turn, response.text)
