"""Built-in plugin: the memory writer job and its triggers (docs/memory.md, "Memory writer").

Triggers, all from the turn path and all just an enqueue keyed by ids:

* **turns**: after a turn, when the session has ``writer.turn_threshold`` unsummarised user turns
  (job id ``writer:<session>:<watermark>``, so a burst of turns queues one run);
* **idle**: a turn queues a delayed check ``writer.idle_seconds`` later; it runs only if that turn is
  still the session's latest. A check that finds the session went on queues the check of its latest
  turn, due ``idle_seconds`` after the session's last activity; so while a check this process queued
  for a session is still due, the session's next turns queue none (one Redis round trip a turn less);
* **session end**: a new session in a scope (idle gap, ``/new``) queues the previous one.

Off-The-Record turns never reach ``gateway_after_turn``, and an OTR session start is ignored.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.hookspecs import hookimpl
from gateway.llm.provider import model_configured
from gateway.memory.background import jobscope
from gateway.memory.background.writer import count_pending, run_writer
from gateway.types import LLMResponse, Reply, Session, StashKey, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.plugins.memory_writer")
JOB = "memory_writer"
# session id -> when (monotonic) the idle check this process queued for it is due
IDLE_CHECKS: StashKey[dict[str, float]] = StashKey()
MAX_IDLE_CHECKS = 10_000


async def memory_writer(ctx: JobContext, payload: dict[str, Any]) -> None:
    gw = ctx.gateway
    cfg = gw.config.background.writer
    session_id = str(payload.get("session_id", ""))
    session = gw.state.sessions.get(session_id)
    if not cfg.enabled or session is None:
        return
    owner = session.scope_key.removeprefix("user:") if session.scope_key.startswith("user:") else ""
    if not model_configured(gw, cfg.backend, JOB, structured=True, user_id=owner):
        return
    if payload.get("reason") == "idle":
        latest = gw.state.turns.latest_message(session_id)
        if latest is not None and latest != payload.get("turn_id"):
            # The session went on. Its later turns may not have queued a check of their own (see
            # gateway_after_turn): queue the latest turn's, due once the session has been idle long
            # enough. Its job id is the one that turn would have used, so it is queued only once.
            due = session.last_active_at + timedelta(seconds=cfg.idle_seconds) - datetime.now(UTC)
            await ctx.bus.enqueue(JOB, {"session_id": session_id, "turn_id": latest, "reason": "idle"},
                                  job_id=f"writer-idle:{latest}", delay=max(due.total_seconds(), 0.0))  # fmt: skip
            return
    scope = jobscope.for_session_scope(gw, session.scope_key)
    result = await run_writer(state=gw.state, store=jobscope.store(gw, scope), provider=gw.model(cfg.backend, owner),
                              session_id=session_id, settings=cfg, tz=scope.tz)  # fmt: skip
    log.debug("memory writer %s: %s", session_id, result.status)


@hookimpl
def gateway_register_jobs(register: JobRegistry) -> None:
    register(memory_writer, name=JOB, timeout=600, max_tries=5)


@hookimpl
async def gateway_after_turn(gateway: Services, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
    cfg = gateway.config.background.writer
    if turn.otr or turn.session is None or gateway.bus is None or not cfg.enabled:
        return
    sid = turn.session.session_id
    if count_pending(gateway.state, sid) >= cfg.turn_threshold:
        wm = gateway.state.writer_progress.get(sid)
        await gateway.bus.enqueue(JOB, {"session_id": sid, "reason": "turns"}, job_id=f"writer:{sid}:{wm}")
    # A check this process queued for the session and that is not due yet will pass the idle check on
    # to this turn (see memory_writer): none is queued now. Once it is due (it may have run), the next
    # turn queues one again, so a lost check costs at most one idle period.
    checks = gateway.stash.setdefault(IDLE_CHECKS, {})
    now = time.monotonic()
    if checks.get(sid, 0.0) > now:
        return
    await gateway.bus.enqueue(JOB, {"session_id": sid, "turn_id": turn.turn_id, "reason": "idle"},
                              job_id=f"writer-idle:{turn.turn_id}", delay=cfg.idle_seconds)  # fmt: skip
    if len(checks) >= MAX_IDLE_CHECKS:
        for key in [k for k, due in checks.items() if due <= now] or [next(iter(checks))]:
            del checks[key]
    checks[sid] = now + cfg.idle_seconds


@hookimpl
async def gateway_session_started(gateway: Services, turn: Turn, session: Session) -> None:
    cfg = gateway.config.background.writer
    if session.otr or gateway.bus is None or not cfg.enabled or not cfg.on_session_end:
        return
    prev = gateway.state.sessions.last_ended(session.scope, excluding=session.session_id)
    if prev is not None and count_pending(gateway.state, prev) > 0:
        await gateway.bus.enqueue(JOB, {"session_id": prev, "reason": "session_end"},
                                  job_id=f"writer-end:{prev}")  # fmt: skip
