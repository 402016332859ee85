"""Read-only views for operators (``kith jobs status`` / ``dead``) and the dead-letter retry."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from redis.asyncio import Redis

from gateway.bus.envelope import ENVELOPE_VERSION
from gateway.bus.keys import GROUP, Keys
from gateway.bus.scripts import Scripts

_SCAN_LIMIT = 10_000  # status and dead-letter views stay bounded on a huge backlog


@dataclass(frozen=True, slots=True)
class QueueStatus:
    name: str
    pending: int  # queued, not yet delivered to any worker
    in_flight: int  # delivered, not yet acked (running, or owned by a worker that died)
    delayed: int  # waiting for a delay or a retry backoff
    oldest_age_s: float | None  # age of the oldest queued or in-flight entry
    dead: int
    consumers: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    entry_id: str
    job_id: str
    name: str
    payload: str
    tries: int
    error: str
    at_ms: int
    enqueued_ms: int
    version: int = ENVELOPE_VERSION


def _str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _int(value: object) -> int:
    return 0 if isinstance(value, Exception) or value is None else int(value)  # type: ignore[call-overload]


async def queue_status(redis: Redis, keys: Keys, names: Iterable[str]) -> list[QueueStatus]:
    known = set(names) | {_str(n) for n in await redis.smembers(keys.queues)}
    delayed_ids = [_str(i) for i in await redis.zrange(keys.delayed, 0, _SCAN_LIMIT - 1)]
    delayed: Counter[str] = Counter()
    if delayed_ids:
        async with redis.pipeline(transaction=False) as pipe:
            for job_id in delayed_ids:
                pipe.hget(keys.job(job_id), "name")
            delayed.update(_str(n) for n in await pipe.execute() if n)
    sec, usec = await redis.time()
    now_ms = sec * 1000 + usec // 1000
    out = []
    for name in sorted(known | set(delayed)):
        stream = keys.stream(name)
        async with redis.pipeline(transaction=False) as pipe:
            pipe.xlen(stream)
            pipe.xpending(stream, GROUP)
            pipe.xrange(stream, "-", "+", count=1)
            pipe.xlen(keys.dead(name))
            pipe.xinfo_groups(stream)
            length, pend, first, dead, groups = await pipe.execute(raise_on_error=False)
        in_flight = 0 if isinstance(pend, Exception) else int(pend["pending"])
        consumers = 0
        if not isinstance(groups, Exception):
            consumers = sum(int(g["consumers"]) for g in groups if g["name"] == GROUP)
        age = None
        if first and not isinstance(first, Exception):
            age = max(now_ms - int(first[0][0].split("-")[0]), 0) / 1000
        # Acked entries are deleted, so the stream holds exactly the queued + in-flight jobs.
        out.append(
            QueueStatus(name, max(_int(length) - in_flight, 0), in_flight, delayed[name], age, _int(dead), consumers)
        )
    return out


async def queue_busy(redis: Redis, keys: Keys, names: Iterable[str]) -> bool:
    """Whether any queue holds a queued or in-flight job (delayed ones do not count): what
    ``Gateway.settle`` polls. One round trip of XLENs instead of ``queue_status``'s per-queue
    pipelines and a lookup per delayed job (~20 commands with the cron jobs a gateway schedules)."""
    known = set(names) | {_str(n) for n in await redis.smembers(keys.queues)}
    if not known:
        return False
    async with redis.pipeline(transaction=False) as pipe:
        for name in known:
            pipe.xlen(keys.stream(name))
        lengths = await pipe.execute(raise_on_error=False)
    # Acked entries are deleted, so a stream's length is its queued + in-flight jobs.
    return any(_int(n) > 0 for n in lengths)


async def dead_letters(redis: Redis, keys: Keys, names: Iterable[str], limit: int = 100) -> list[DeadLetter]:
    """Newest first, across every queue."""
    known = set(names) | {_str(n) for n in await redis.smembers(keys.queues)}
    out: list[DeadLetter] = []
    for name in known:
        for entry_id, f in await redis.xrevrange(keys.dead(name), "+", "-", count=limit) or []:
            fields = {_str(k): _str(v) for k, v in (f or {}).items()}
            out.append(
                DeadLetter(
                    entry_id=_str(entry_id),
                    job_id=fields.get("id", ""),
                    name=fields.get("name", name),
                    payload=fields.get("payload", "{}"),
                    tries=int(fields.get("tries", 0)),
                    error=fields.get("error", ""),
                    at_ms=int(fields.get("at", 0)),
                    enqueued_ms=int(fields.get("enq", 0)),
                    version=int(fields.get("v", ENVELOPE_VERSION) or ENVELOPE_VERSION),
                )
            )
    out.sort(key=lambda d: d.at_ms, reverse=True)
    return out[:limit]


async def retry_dead(redis: Redis, scripts: Scripts, keys: Keys, names: Iterable[str], ident: str) -> str:
    """Re-enqueue the newest dead letter whose job id (or entry id) is ``ident``.

    Returns "queued", "already-queued" (a live job with that id exists; the dead letter is dropped)
    or "not-found".
    """
    for dl in await dead_letters(redis, keys, names, limit=_SCAN_LIMIT):
        if ident not in (dl.job_id, dl.entry_id):
            continue
        created, _state = await scripts.requeue_dead(
            keys=[keys.dead(dl.name), keys.job(dl.job_id), keys.stream(dl.name), keys.delayed, keys.queues],
            args=[dl.entry_id, dl.job_id, dl.name, dl.payload, str(dl.version)],
        )
        if int(created) == -1:
            continue  # retried concurrently by someone else
        return "queued" if int(created) == 1 else "already-queued"
    return "not-found"


async def discard_dead(redis: Redis, keys: Keys, names: Iterable[str], ident: str) -> bool:
    """Delete the newest dead letter whose job id (or entry id) is ``ident``: the operator decided it
    is not worth another try. False when there is none."""
    for dl in await dead_letters(redis, keys, names, limit=_SCAN_LIMIT):
        if ident in (dl.job_id, dl.entry_id):
            return bool(await redis.xdel(keys.dead(dl.name), dl.entry_id))
    return False
