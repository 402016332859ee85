"""Built-in plugin: compaction of long sessions into working memory (the hooks; the logic is
``gateway.memory.background.compaction``).

After each turn (cheap: one indexed count) the live history is measured; once it is due, a
``memory.compact`` job summarises the older turns into the conversation root's ``WORKING.md`` and
records the compacted prefix. The summary of the compacted part then stands in for the turns it
replaced, as a context section.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gateway.bus import JobContext, JobRegistry
from gateway.hookspecs import hookimpl
from gateway.llm.provider import model_configured
from gateway.memory.background import jobscope
from gateway.memory.background.compaction import compact, needs_compaction
from gateway.memory.files.store import MemoryStore
from gateway.turn.sessions import compaction_in_turn
from gateway.types import ContextSection, LLMResponse, Reply, Stability, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.compaction")
JOB = "memory.compact"


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
    await compact(state=gateway.state, session_id=session_id, store=store, provider=gateway.model("cheap", owner),
                  sessions=gateway.config.sessions, memory=gateway.config.memory)  # fmt: skip


@hookimpl
def gateway_register_jobs(register: JobRegistry) -> None:
    register(compact_session, name=JOB, timeout=180, max_tries=4)


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
