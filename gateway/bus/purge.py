"""Dropping every job about someone: queued, delayed, backing off and dead-lettered (``kith users delete``).

Jobs carry ids (a user, a session, a turn, a memory scope), never message text; a job is someone's
when its id or payload names one of the ``needles`` (the person's user id, their scope, their session
and turn ids). A job a worker is running is left to finish: it finds the person gone.

After dropping, an embedded server rewrites its append-only file, so the ids are no longer in the
history it keeps on disk either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.bus.errors import BusError
from gateway.bus.keys import GROUP, Keys

log = logging.getLogger("kith.bus")

_PAGE = 500
_REWRITE_WAIT_S = 30.0


def _s(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _names(fields: Mapping[Any, Any], needles: Collection[str]) -> bool:
    text = _s(fields.get("id", fields.get(b"id", ""))) + "\n" + _s(fields.get("payload", fields.get(b"payload", "")))
    return any(n in text for n in needles)


async def purge_jobs(redis: Redis, keys: Keys, needles: Collection[str], *, rewrite_aof: bool) -> int:
    """Drop every waiting or dead job naming one of ``needles``; how many were dropped."""
    needles = [n for n in needles if n]
    if not needles:
        return 0
    try:
        dropped = 0
        names = sorted(_s(n) for n in await redis.smembers(keys.queues))
        for name in names:
            for stream, grouped in ((keys.stream(name), True), (keys.dead(name), False)):
                dropped += await _purge_stream(redis, keys, stream, grouped, needles)
        for raw in await redis.zrange(keys.delayed, 0, -1):
            job_id = _s(raw)
            fields = await redis.hgetall(keys.job(job_id))
            if _names({**{_s(k): v for k, v in fields.items()}, "id": job_id}, needles):
                await redis.zrem(keys.delayed, job_id)
                await redis.delete(keys.job(job_id))
                dropped += 1
        # The cron scheduler's per-user slots (``<job>|<user>``).
        stale = [f for f in map(_s, await redis.hkeys(keys.cron)) if any(f.endswith("|" + n) for n in needles)]
        if stale:
            await redis.hdel(keys.cron, *stale)
        if rewrite_aof:
            await _rewrite(redis)
    except (RedisError, OSError) as exc:
        raise BusError(f"dropping the person's jobs failed: {exc}") from exc
    return dropped


async def _purge_stream(redis: Redis, keys: Keys, stream: str, grouped: bool, needles: Collection[str]) -> int:
    dropped = 0
    start = "-"
    while True:
        entries = await redis.xrange(stream, start, "+", count=_PAGE)
        if not entries:
            return dropped
        for entry_id, fields in entries:
            if not _names({_s(k): v for k, v in fields.items()}, needles):
                continue
            mid = _s(entry_id)
            if grouped:
                await redis.xack(stream, GROUP, mid)
            await redis.xdel(stream, mid)
            job_key = keys.job(_s(fields.get(b"id", fields.get("id", ""))))
            if grouped and _s(await redis.hget(job_key, "msg") or "") == mid:
                await redis.delete(job_key)
            dropped += 1
        if len(entries) < _PAGE:
            return dropped
        start = "(" + _s(entries[-1][0])


async def _rewrite(redis: Redis) -> None:
    """Rewrite the append-only file from the current data (the removed entries' history goes)."""
    try:
        await redis.bgrewriteaof()
    except RedisError as exc:
        if "already in progress" not in str(exc):
            raise
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _REWRITE_WAIT_S
    while loop.time() < deadline:
        info = await redis.info("persistence")
        if not int(info.get("aof_rewrite_in_progress", 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            return
        await asyncio.sleep(0.05)
    log.warning("the job bus's append-only file is still being rewritten; the removed jobs leave it when it ends")
