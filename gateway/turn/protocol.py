"""The default turn protocol (``gateway_handle_turn``, trylast so a plugin can replace it).

Order, each step cheap before anything costs money:

1. ``gateway_filter_inbound``  drop bots, self, noise
2. access                      untrusted senders through ``gateway_check_access`` (deny by default)
3. dedupe                      (channel, platform message id), persisted after the turn
4. identity                    ``gateway_resolve_identity``
5. commands                    ``/new /otr /link /help /start`` via ``gateway_handle_command``
6. session                     idle gap -> new session, ``gateway_session_started``
   attachments                 ``gateway_prepare_message`` (files read, stored, linked; or refused)
7. context                     ``gateway_context_sections`` -> budgeter
8. LLM                         ``gateway_before_llm_call`` -> ``gateway_llm_call`` (streamed)
9. reply                       ``gateway_render_reply`` splits to the channel's limit
10. persist + after            transcript (never for OTR) -> ``gateway_after_turn``
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.hookcall import HookFailed
from gateway.hookspecs import hookimpl
from gateway.llm.base import LLMError
from gateway.ops.metrics import OUTCOME
from gateway.tools import toolset
from gateway.turn.budget import assemble
from gateway.turn.commands import failed as command_failed
from gateway.turn.commands import unknown as unknown_command
from gateway.turn.gate import TURNS
from gateway.turn.sessions import scope_key_for
from gateway.turn.spool import SpooledTurn
from gateway.turn.stop import STOP, STOPPED_REASON, Shown, until_stopped
from gateway.turn.writeback import NOT_KEPT_NOTE, write_back_of
from gateway.turn.writefailures import write_failures
from gateway.types import (
    AccessDecision,
    ConversationKind,
    Drop,
    HistoryMessage,
    LLMRequest,
    LLMResponse,
    Reply,
    StashKey,
    Turn,
    UserRef,
)
from gateway.util.text import split_text

if TYPE_CHECKING:
    from gateway.services import Services

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


async def build_request(gateway: Services, turn: Turn) -> LLMRequest:
    sections = await gateway.hooks.context_sections(gateway, turn)
    assembled = assemble(sections, gateway.config.context.budget_tokens)
    turn.stash[ASSEMBLED] = assembled
    prepared = turn.prepared
    content = turn.message.text
    if prepared is not None and prepared.attached:
        content = f"{content}\n\n{prepared.attached}"
    user_msg = HistoryMessage(role="user", content=content, timestamp=turn.received_at, turn_id=turn.turn_id,
                              images=prepared.images if prepared is not None else ())
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


@dataclass(frozen=True, slots=True)
class Proceed:
    """Admitted: the turn goes on."""


@dataclass(frozen=True, slots=True)
class Stop:
    """Not admitted: the turn ends here, answering ``reply`` (``None``: without a word)."""

    reply: Reply | None = None


Admission = Proceed | Stop


async def _admit(gateway: Services, turn: Turn) -> Admission:
    """Steps 1-3: filter, access, dedupe."""
    msg = turn.message
    hooks = gateway.hooks
    drop = await hooks.filter_inbound(msg)
    if drop is not None:
        log.info("dropped %s message from %s: %s", msg.channel, msg.account_id, drop.reason)
        return Stop()
    if not msg.trusted:
        decision = await hooks.check_access(gateway, msg)
        if isinstance(decision, Drop):
            log.info("access denied for %s:%s: %s", msg.channel, msg.account_id, decision.reason)
            return Stop(Reply(text=decision.reply, chunks=(decision.reply,), notice=True) if decision.reply else None)
        if decision is not AccessDecision.ALLOW:
            log.info("access denied for %s:%s (no policy allowed it)", msg.channel, msg.account_id)
            return Stop()
    if msg.message_id and not gateway.dedupe.claim(msg.channel, msg.message_id):
        log.info("duplicate %s message %s ignored", msg.channel, msg.message_id)
        return Stop()
    return Proceed()


@hookimpl(trylast=True)
async def gateway_handle_turn(gateway: Services, turn: Turn) -> Reply | None:
    admission = await _admit(gateway, turn)
    if isinstance(admission, Stop):
        return admission.reply
    msg = turn.message
    hooks = gateway.hooks
    user = await hooks.resolve_identity(gateway, msg)
    if user is None:
        log.error("no plugin resolved an identity for %s:%s", msg.channel, msg.account_id)
        return None
    turn.user = user
    # Several nodes (gateway/cluster): one turn of a conversation scope at a time across all of them,
    # so two nodes never interleave one session's writes. One node: no lock, nothing changes.
    async with gateway.cluster.turn_lock(scope_key_for(user, msg)) as held:
        if held is not None and msg.message_id and gateway.state.dedupe.seen(msg.channel, msg.message_id):
            # The same platform message reached another node as well (a redelivery, a chat platform
            # connected from every node) and was answered there while this node waited for the lock.
            log.info("duplicate %s message %s answered by another node", msg.channel, msg.message_id)
            return None
        return await _serve(gateway, turn, user)


async def _serve(gateway: Services, turn: Turn, user: UserRef) -> Reply | None:
    """Steps 5-10, for an admitted message whose sender is known."""
    msg = turn.message
    hooks = gateway.hooks
    command = parse_command(msg.text)
    if command is not None:
        was_otr = gateway.sessions.is_otr(user, msg)
        # A command no plugin answers is the host's to answer: never the model's, which would guess.
        try:
            answer = await hooks.handle_command(gateway, turn, command[0], command[1]) or unknown_command(command[0])
        except HookFailed:
            answer = command_failed(command[0])
        # Commands entering or leaving Off-The-Record leave no trace either.
        if not was_otr and not gateway.sessions.is_otr(user, msg):
            gateway.dedupe.persist(msg.channel, msg.message_id)
        return await _render_notice(gateway, turn, answer)

    session = gateway.sessions.current(user, msg, turn.received_at)
    turn.session = session
    if session.is_new:
        await hooks.session_started(gateway, turn, session)
    turn.history = gateway.sessions.history(session, turn)
    redo = msg.raw.get("redo") if msg.raw else None
    if isinstance(redo, str) and redo:
        # Regenerate or edit (the channel checked it is the last exchange): answered afresh, as if that
        # exchange had not been. It stays in the transcript and the session log: both attempts happened.
        turn.history = tuple(h for h in turn.history if h.turn_id != redo)
    prepared = await hooks.prepare_message(gateway, turn)
    if isinstance(prepared, Reply):  # a refused attachment: answered, nothing recorded
        if not session.otr:
            gateway.dedupe.persist(msg.channel, msg.message_id)
        return await _render_notice(gateway, turn, prepared)
    if prepared is not None:
        turn.prepared = prepared
        msg = turn.message = replace(msg, text=prepared.text)
    # The message is stored before the model is called, so a crash during the call keeps it; the
    # persist step below completes the turn with the reply (a failed call takes the message back).
    gateway.sessions.record_message(
        session, turn_id=turn.turn_id, text=msg.text, channel=msg.channel,
        speaker=msg.display_name or msg.account_id, at=turn.received_at, user_id=user.user_id,
    )

    response: LLMResponse | None = None
    try:
        request = await build_request(gateway, turn)
        request = await hooks.before_llm_call(gateway, turn, request) or request
        # What was shown is kept, so a stopped reply ends with exactly that (gateway/turn/stop.py).
        on_delta = turn.stash.get(ON_DELTA)
        shown = Shown(on_delta)
        with TURNS.waiting():  # no core needed while the model answers: background work may run
            response = await until_stopped(hooks.llm_call(gateway, turn, request, shown if on_delta else None),
                                           turn.stash.get(STOP), shown, turn.turn_id)  # fmt: skip
        if response is None:
            raise LLMError("no plugin answered gateway_llm_call")
    except LLMError as exc:
        turn.stash[OUTCOME] = "model_error"
        gateway.sessions.discard_message(session, turn.turn_id)
        log.warning("model call failed for turn %s: %s", turn.turn_id, exc)
        await hooks.turn_error(gateway, turn, exc)
        # Marked, so a client can offer to send it again (the web chat's Retry, docs/protocol.md).
        return replace(await _render_notice(gateway, turn, Reply(text=exc.user_message, notice=True)), model_error=True)
    except Exception as exc:
        turn.stash[OUTCOME] = "error"
        gateway.sessions.discard_message(session, turn.turn_id)
        log.exception("turn %s failed", turn.turn_id)
        await hooks.turn_error(gateway, turn, exc)
        return await _render_notice(gateway, turn, Reply(text=GENERIC_ERROR, notice=True))

    reply = await hooks.render_reply(gateway, turn, response) or default_render(gateway, turn, response.text)
    if response.stop_reason == STOPPED_REASON:
        reply = replace(reply, stopped=True)

    # Persist + after. The reply exists: a write failing now (a full disk, a broken database) is
    # logged and shown in /healthz, never turned into an error instead of the answer. Each write is
    # tried on its own, so the after-turn hooks (session log, jobs) still get the turn.
    failures = write_failures(gateway.stash)
    ok = True
    reply_at = datetime.now(UTC)

    def record() -> None:
        gateway.sessions.record(
            session, turn_id=turn.turn_id, user_text=msg.text, reply_text=reply.text, channel=msg.channel,
            speaker=msg.display_name or msg.account_id, at=turn.received_at, reply_at=reply_at,
            user_id=user.user_id,
        )

    def record_with_key() -> None:
        # The dedupe key commits with the reply or not at all. Written first on its own, a process
        # killed between the two left the key without the reply: the message sent again (to this
        # node restarted, or to another) was dropped as answered, and no answer was ever stored
        # (issue 27, item 6). A failed write leaves neither; the spool below keeps both.
        with gateway.state.tx():
            gateway.dedupe.mark(msg.channel, msg.message_id)
            record()

    stored = _persist(gateway, turn, "transcript", record if session.otr else record_with_key)
    ok &= stored
    if stored and not session.otr:
        ok &= _persist(gateway, turn, "dedupe pruning", gateway.dedupe.prune_if_due)
    answer = reply
    if not session.otr:
        ok &= _persist(gateway, turn, "conversation address", lambda: gateway.remember_conversation(turn))
        if not stored:  # the turn goes to the spool, or the person is told it is not kept
            answer = _keep(gateway, turn, user, reply, reply_at)
        await hooks.after_turn(gateway, turn, reply, response)
    if ok:
        failures.success()
    if stored and (keeper := write_back_of(gateway)) is not None:
        keeper.writes_succeed()  # the transcript takes writes again: spooled turns go back now
    return answer


def _keep(gateway: Services, turn: Turn, user: UserRef, reply: Reply, reply_at: datetime) -> Reply:
    """The transcript did not take an answered turn: spool it (gateway/turn/writeback.py) to be written
    back when it can; if that fails too, the reply says that this exchange is not kept."""
    msg, session = turn.message, turn.session
    assert session is not None
    keeper = write_back_of(gateway)
    spooled = SpooledTurn(
        turn_id=turn.turn_id, session_id=session.session_id, user_id=user.user_id, channel=msg.channel,
        conversation_key=session.conversation_key, speaker=msg.display_name or msg.account_id, text=msg.text,
        at=turn.received_at, reply=reply.text, reply_at=reply_at, group=msg.kind is ConversationKind.GROUP,
        message_id=msg.message_id or "", conversation_id=msg.conversation_id or msg.account_id,
        kind=msg.kind.value, persona=session.persona,
    )
    if keeper is not None and keeper.keep(spooled):
        return reply
    if keeper is None:
        log.error("turn %s was answered but could not be stored, and there is no turn spool: its person is told",
                  turn.turn_id)
    return replace(reply, text=f"{reply.text}\n\n{NOT_KEPT_NOTE}", chunks=(*reply.chunks, NOT_KEPT_NOTE))


def _persist(gateway: Services, turn: Turn, what: str, write: Callable[[], object]) -> bool:
    try:
        write()
    except Exception as exc:
        # No transaction is left open: State.tx() rolls back a failed COMMIT (SQLITE_FULL), and so does
        # a failed single statement (gateway/state/sqlite/database.py), or every later BEGIN would fail.
        write_failures(gateway.stash).failure(what, turn.turn_id, exc)
        return False
    return True


def default_render(gateway: Services, turn: Turn, text: str, *, notice: bool = False) -> Reply:
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


async def _render_notice(gateway: Services, turn: Turn, answer: Reply) -> Reply:
    return default_render(gateway, turn, answer.text, notice=True)


@hookimpl(trylast=True)
def gateway_render_reply(gateway: Services, turn: Turn, response: LLMResponse) -> Reply:
    return default_render(gateway, turn, response.text)
