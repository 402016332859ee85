"""The operator's "needs attention" list: memory jobs that dead-lettered or keep failing (issue 28).

A memory job whose model answers are unusable retries, then dead-letters; ``kith doctor`` and
``/healthz`` count them (``gateway.ops.memory_jobs``). Here the operator sees each dead memory job
(its name, id, tries and the last line of its error: payloads carry ids, never text) and decides:
retry it (``kith jobs retry``), or discard it. The console's "Needs attention" view reads these routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Call, Route
from gateway.ops.memory_jobs import is_memory_job, last_line, memory_jobs

if TYPE_CHECKING:
    from gateway.bus.bus import JobBus

LIMIT = 200


class DeadJob(Answer):
    job_id: str
    entry_id: str
    name: str
    tries: int
    error: str = Field(description="the last line of the last try's error")
    at_ms: int


class Attention(Answer):
    dead: list[DeadJob] = Field(description="dead-lettered memory jobs, newest first")
    failing: int = Field(description="memory jobs still being retried after failing repeatedly")
    last_failing: str


class Decided(Answer):
    ident: str
    result: str = Field(description="queued, already-queued, discarded or not-found")


def _bus(call: Call) -> JobBus:
    bus = call.gateway.bus
    if bus is None:
        raise ApiError(503, "this process runs no job bus")
    return bus


async def attention(call: Call) -> Attention:
    bus = _bus(call)
    dead = [d for d in await bus.dead(LIMIT) if is_memory_job(d.name)]
    summary = await memory_jobs(bus.redis, bus.keys)
    return Attention(dead=[DeadJob(job_id=d.job_id, entry_id=d.entry_id, name=d.name, tries=d.tries,
                                   error=last_line(d.error), at_ms=d.at_ms) for d in dead],
                     failing=summary.failing, last_failing=summary.last_failing)  # fmt: skip


async def _memory_dead(call: Call, ident: str) -> bool:
    dead = await _bus(call).dead(LIMIT)
    return any(ident in (d.job_id, d.entry_id) and is_memory_job(d.name) for d in dead)


async def retry(call: Call) -> Decided:
    ident = call.param("ident")
    if not await _memory_dead(call, ident):
        raise ApiError(404, "no dead memory job with that id")
    return Decided(ident=ident, result=await _bus(call).retry(ident))


async def discard(call: Call) -> Decided:
    ident = call.param("ident")
    if not await _memory_dead(call, ident):
        raise ApiError(404, "no dead memory job with that id")
    gone = await _bus(call).discard(ident)
    return Decided(ident=ident, result="discarded" if gone else "not-found")


ERRORS = (401, 403, 503)
ROUTES = [
    Route("GET", "/api/memory/attention", "memory jobs that need the operator: dead-lettered or failing again",
          Attention, attention, operator=True, tag="operator", errors=ERRORS),
    Route("POST", "/api/memory/attention/{ident}/retry", "queue a dead memory job again", Decided, retry,
          operator=True, tag="operator", errors=(*ERRORS, 404)),
    Route("POST", "/api/memory/attention/{ident}/discard", "discard a dead memory job", Decided, discard,
          operator=True, tag="operator", errors=(*ERRORS, 404)),
]
