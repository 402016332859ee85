"""Memory jobs that need attention: dead-lettered, or failing again and again (issue 28).

A memory job whose model answers are unusable retries and then dead-letters, and nothing else says
so: the person's memory quietly stops growing. ``kith doctor`` and ``/healthz`` read the same view
from the bus's Redis, read-only and bounded:

* dead letters: the length of each memory queue's dead-letter stream, and its newest entry;
* repeatedly failing: jobs not dead yet whose hash (``<prefix>:job:<id>``) says they failed at least
  ``REPEATED`` times (``prior``), with the error of their last try.

"Memory jobs" are the background memory stages (``MEMORY_JOBS``: the writer, the night, distillation,
compaction, hygiene, retention and index work). Only a job's name, id, count and the last line of its
error are reported: payloads carry ids, never text, and tracebacks stay in ``kith jobs dead``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.bus.keys import Keys
from gateway.types import StashKey
from gateway.util.safetext import printable

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.ops.memory_jobs")

MEMORY_JOBS = ("memory", "sleep_", "distill_", "retention")  # name prefixes: memory_writer, memory.index...
REPEATED = 2  # failed tries of a job still being retried that make it "repeatedly failing"
SCAN_LIMIT = 10_000  # job hashes looked at: the view stays bounded on a huge backlog
ERROR_CHARS = 200
HEALTH_TTL_S = 15.0  # /healthz may be polled every second: the bus is read at most this often
HEALTH_TIMEOUT_S = 1.0
# (monotonic time of the reading, its /healthz body)
_HEALTH: StashKey[tuple[float, dict[str, Any]]] = StashKey()


def is_memory_job(name: str) -> bool:
    return name.startswith(MEMORY_JOBS)


def _str(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else "" if value is None else str(value)


def last_line(error: str) -> str:
    """The exception line of a stored traceback (its last non-empty line), short and printable."""
    line = next((ln.strip() for ln in reversed(error.splitlines()) if ln.strip()), "")
    line = printable(line)
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryJobs:
    dead: int = 0
    failing: int = 0
    dead_by_job: dict[str, int] = field(default_factory=dict)
    failing_by_job: dict[str, int] = field(default_factory=dict)
    last_dead: str = ""  # "<job name> <job id>: <error line>"
    last_dead_at_ms: int = 0
    last_failing: str = ""  # the same, for the most-tried job still being retried

    @property
    def ok(self) -> bool:
        return not (self.dead or self.failing)

    def problems(self) -> list[str]:
        """One line per kind of trouble, for ``/healthz``'s ``degraded`` list."""
        out = []
        if self.dead:
            out.append(f"{self.dead} memory job(s) dead-lettered ({_by(self.dead_by_job)}); last: {self.last_dead}")
        if self.failing:
            out.append(f"{self.failing} memory job(s) failing repeatedly ({_by(self.failing_by_job)}); "
                       f"last: {self.last_failing}")  # fmt: skip
        return out

    def as_json(self) -> dict[str, Any]:
        return {"dead": self.dead, "failing": self.failing, "dead_by_job": self.dead_by_job,
                "failing_by_job": self.failing_by_job, "last_dead": self.last_dead,
                "last_dead_at_ms": self.last_dead_at_ms, "last_failing": self.last_failing}  # fmt: skip


def _by(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


async def memory_jobs(redis: Any, keys: Keys) -> MemoryJobs:
    """Read the bus's dead letters and retrying jobs of the memory queues. Redis errors propagate."""
    queues = sorted(n for n in (_str(q) for q in await redis.smembers(keys.queues)) if is_memory_job(n))
    dead_by: dict[str, int] = {}
    last_dead, last_at = "", 0
    if queues:
        async with redis.pipeline(transaction=False) as pipe:
            for name in queues:
                pipe.xlen(keys.dead(name))
                pipe.xrevrange(keys.dead(name), "+", "-", count=1)
            answers = await pipe.execute()
        for i, name in enumerate(queues):
            count, newest = int(answers[2 * i] or 0), answers[2 * i + 1] or []
            if not count:
                continue
            dead_by[name] = count
            for _, raw in newest:
                f = {_str(k): _str(v) for k, v in (raw or {}).items()}
                at = int(f.get("at", "0") or 0)
                if at >= last_at:
                    last_at = at
                    last_dead = f"{name} {f.get('id', '')}: {last_line(f.get('error', ''))}"
    failing: Counter[str] = Counter()
    worst, last_failing = 0, ""
    seen = 0
    batch: list[str] = []

    async def look(ids: list[str]) -> None:
        nonlocal worst, last_failing
        async with redis.pipeline(transaction=False) as pipe:
            for key in ids:
                pipe.hmget(key, "name", "prior", "error")
            rows = await pipe.execute()
        for key, (name, prior, error) in zip(ids, rows, strict=True):
            name, tries = _str(name), int(_str(prior) or 0)
            if not is_memory_job(name) or tries < REPEATED:
                continue
            failing[name] += 1
            if tries > worst:
                worst = tries
                job_id = key.removeprefix(keys.job(""))
                last_failing = f"{name} {job_id} ({tries} tries): {last_line(_str(error))}"

    async for key in redis.scan_iter(match=keys.job("*"), count=1000):
        batch.append(_str(key))
        seen += 1
        if len(batch) == 500:
            await look(batch)
            batch = []
        if seen >= SCAN_LIMIT:
            break
    if batch:
        await look(batch)
    return MemoryJobs(dead=sum(dead_by.values()), failing=sum(failing.values()), dead_by_job=dead_by,
                      failing_by_job=dict(failing), last_dead=last_dead, last_dead_at_ms=last_at,
                      last_failing=last_failing)  # fmt: skip


async def health_of_memory_jobs(gateway: Services) -> dict[str, Any]:
    """``/healthz``'s ``memory_jobs``: the counts, the last errors and a ``problems`` list (popped by
    the caller into ``degraded``). Read at most every ``HEALTH_TTL_S``; a bus that does not answer
    within ``HEALTH_TIMEOUT_S`` gives ``{"error": ...}`` and no problem (the bus's own health says it)."""
    bus = getattr(gateway, "bus", None)
    if bus is None:
        return {}
    now = time.monotonic()
    cached = gateway.stash.get(_HEALTH)
    if cached is not None and now - cached[0] < HEALTH_TTL_S:
        return dict(cached[1])
    try:
        found = await asyncio.wait_for(memory_jobs(bus.redis, bus.keys), HEALTH_TIMEOUT_S)
        body: dict[str, Any] = {**found.as_json(), "problems": found.problems()}
    except Exception as exc:  # a health endpoint answers whatever the bus does
        log.debug("memory jobs not read for /healthz: %r", exc)
        body = {"error": f"the bus did not answer: {type(exc).__name__}"}
    gateway.stash[_HEALTH] = (now, body)
    return dict(body)
