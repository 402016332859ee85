"""Built-in plugin: compaction of long sessions into working memory (the hooks; the logic is
``gateway.memory.background.compaction``).

After each turn (cheap: one indexed count) the live history is measured; once it is due, a
``memory.compact`` job summarises the older turns into the conversation root's ``WORKING.md`` and
records the compacted prefix. The summary of the compacted part then stands in for the turns it
replaced, as a context section. For a person's own session a ``memory.compaction_curation`` job then
curates USER.md and PATTERNS.md from that summary (seed 003: facts reach the profile now, not at
night), through the nightly curation's ops, rails, screen and audit (``sleep.curate_learned``); run
id ``compaction-<session>-<seq>``, so a retried job curates once.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gateway.bus import JobContext, JobRegistry
from gateway.hookspecs import hookimpl
from gateway.llm.provider import model_configured
from gateway.memory.background import jobscope
from gateway.memory.background.compaction import compact, needs_compaction
from gateway.memory.background.sleep import curate_learned
from gateway.memory.files.store import MemoryStore
from gateway.turn.sessions import compaction_in_turn
from gateway.types import ContextSection, LLMResponse, Reply, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.compaction")
JOB = "memory.compact"
CURATE_JOB = "memory.compaction_curation"


@hookimpl
async def gateway_after_turn(gateway: Services, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
    session, bus = turn.session, gateway.bus
    if session is None or bus is None:
        return
    compacted = compaction_in_turn(gateway.state, turn, session.session_id)
    if not needs_compaction(gateway.state, gateway.config.sessions, session.session_id,
                            upto_seq=compacted.upto_seq if compacted else 0):
        return
    # One compaction per session at a time: the id is idempotent while the job is pending or running.
    await bus.enqueue(JOB, {"session_id": session.session_id}, job_id=f"compact:{session.session_id}")


async def compact_session(ctx: JobContext, payload: dict[str, Any]) -> None:
    gateway: Services = ctx.gateway
    session_id = str(payload["session_id"])
    if not model_configured(gateway, "cheap", JOB):
        return
    session = gateway.state.sessions.get(session_id)
    if session is None:
        log.warning("compaction: session %s is gone", session_id)
        return

    def store() -> MemoryStore:
        return jobscope.store(gateway, jobscope.for_session_scope(gateway, session.scope_key))

    owner = session.scope_key.removeprefix("user:") if session.scope_key.startswith("user:") else ""
    if not model_configured(gateway, "cheap", JOB, user_id=owner):
        return
    n = await compact(state=gateway.state, session_id=session_id, store=store,
                      provider=gateway.model("cheap", owner), sessions=gateway.config.sessions,
                      memory=gateway.config.memory)  # fmt: skip
    sleep = gateway.config.background.sleep
    compacted = gateway.state.compactions.get(session_id)
    if n and owner and compacted is not None and sleep.curate and sleep.curate_after_compaction:
        # One pending curation per session: it reads the newest summary (rolling: it holds the older
        # ones) when it runs, so a compaction meanwhile is not lost by being folded into it.
        await ctx.bus.enqueue(CURATE_JOB, {"session_id": session_id, "upto_seq": compacted.upto_seq},
                              job_id=f"compaction-curation:{session_id}")


async def curate_compacted(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Curate the person's profile from the summary of their session's compacted span."""
    gateway: Services = ctx.gateway
    session_id = str(payload["session_id"])
    session, compacted = gateway.state.sessions.get(session_id), gateway.state.compactions.get(session_id)
    if session is None or compacted is None or not session.scope_key.startswith("user:") or gateway.kg is None:
        return
    upto = compacted.upto_seq  # the newest compaction's (the payload's may be older)
    owner = session.scope_key.removeprefix("user:")
    bg = gateway.config.background
    if not model_configured(gateway, bg.sleep.curation_backend, CURATE_JOB, structured=True, user_id=owner):
        return
    scope = jobscope.for_user(gateway, owner)
    # The summary's statements, as "learned recently" (headings are the summary's own structure).
    learned = [ln.strip().lstrip("-*").strip() for ln in compacted.summary.splitlines()
               if ln.strip() and not ln.lstrip().startswith("#")]  # fmt: skip
    outcome = await curate_learned(
        store=jobscope.store(gateway, scope), kg=gateway.kg, kg_scope=scope.kg_scope, key=scope.memory_scope,
        run_id=f"compaction-{session_id[:16]}-{upto}", day=datetime.now(UTC).astimezone(scope.tz).date(),
        learned=learned, provider=gateway.model(bg.sleep.curation_backend, owner), cfg=bg.sleep, rails=bg.curation,
    )  # fmt: skip
    log.info("compaction curation of session %s: %s", session_id[:8], outcome)


@hookimpl
def gateway_register_jobs(register: JobRegistry) -> None:
    register(compact_session, name=JOB, timeout=180, max_tries=4)
    register(curate_compacted, name=CURATE_JOB, timeout=180, max_tries=3)


@hookimpl
def gateway_context_sections(gateway: Services, turn: Turn) -> ContextSection | None:
    """The summary of the compacted part of this session stands in for the turns it replaced."""
    session = turn.session
    if session is None or session.otr:
        return None
    compacted = compaction_in_turn(gateway.state, turn, session.session_id)
    if compacted is None:
        return None
    return ContextSection(
        source="session.summary",
        title="Earlier in this conversation (summary of older turns)",
        text=compacted.summary,
        priority=30,
        stability=Stability.STABLE,  # changes only when compaction runs again
        protected=True,  # it *is* the conversation so far: trimming it would lose context
        as_data=True,
    )
