"""The worker's background duties: heartbeats, claiming abandoned deliveries, promoting due jobs.

Heartbeats are what make long jobs safe: a delivery becomes claimable only after ``claim_idle_ms``
without one, and the owner refreshes every ``claim_idle_ms / 3``. So a healthy job is never
stolen however long it runs, while a killed worker's jobs are claimed within ~1.5x the idle time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from redis.exceptions import RedisError, ResponseError

from gateway.bus.envelope import Delivery, fields_to_dict
from gateway.bus.errors import server_refuses_writes
from gateway.bus.keys import GROUP

if TYPE_CHECKING:
    from gateway.bus.worker import Worker

log = logging.getLogger("kith.bus.worker")
JANITOR_EVERY_S = 60.0


async def _pause(w: Worker, seconds: float) -> None:
    """Sleep, but wake at once when the worker stops."""
    try:
        await asyncio.wait_for(w.stopping.wait(), timeout=seconds)
    except TimeoutError:
        pass


async def heartbeat_loop(w: Worker) -> None:
    """Until the worker has drained its running jobs (``w.drained``); it also beats after ``stopping``."""
    while not w.drained.is_set():
        try:
            await asyncio.wait_for(w.drained.wait(), timeout=w.heartbeat_s)
            return
        except TimeoutError:
            pass
        try:
            await beat(w)
        except (RedisError, OSError) as exc:
            log.warning("heartbeat failed (%s); retrying", exc)


async def beat(w: Worker, only: Delivery | None = None) -> set[tuple[str, str]]:
    """Refresh the idle time of our deliveries; mark the ones another worker claimed as lost."""
    by_stream: dict[str, list[str]] = defaultdict(list)
    for (stream, msg_id), running in list(w.inflight.items()):
        if not running.lost and (only is None or (stream, msg_id) == (only.stream, only.msg_id)):
            by_stream[stream].append(msg_id)
    owned: set[tuple[str, str]] = set()
    for stream, ids in by_stream.items():
        mine = set(await w.scripts.heartbeat(keys=[stream], args=[GROUP, w.consumer, *ids]))
        owned |= {(stream, m) for m in mine}
        for msg_id in ids:
            gone = w.inflight.get((stream, msg_id))
            if msg_id not in mine and gone is not None and not gone.settling:
                gone.lost = True
                log.warning(
                    "job %s (%s) was claimed by another worker while running here",
                    gone.delivery.job_id,
                    gone.delivery.name,
                )
    return owned


async def beat_one(w: Worker, d: Delivery) -> bool:
    """``ctx.heartbeat()``: refresh one delivery now; False if it is no longer ours."""
    return (d.stream, d.msg_id) in await beat(w, only=d)


async def claim_loop(w: Worker) -> None:
    """XAUTOCLAIM each stream, following its cursor across calls until it wraps to 0-0."""
    cursors = dict.fromkeys(w.specs, "0-0")
    interval = max(w.claim_idle_ms / 2000, 0.05)
    janitor_at = time.monotonic() + JANITOR_EVERY_S
    while not w.stopping.is_set():
        await _pause(w, interval)
        try:
            for stream, spec in w.specs.items():
                while (room := w.room(stream)) > 0 and not w.stopping.is_set():
                    cursor, entries, buried = await w.scripts.claim(
                        keys=[stream, w.keys.dead(spec.name)],
                        args=[
                            GROUP,
                            w.consumer,
                            w.claim_idle_ms,
                            cursors[stream],
                            room,
                            w.max_tries(spec),
                            w.keys.prefix,
                        ],
                    )
                    cursors[stream] = cursor
                    if buried:
                        log.error("%d %s jobs dead-lettered: delivery cap reached by lost workers", buried, spec.name)
                    for msg_id, count, flat in entries:
                        w.spawn(Delivery.from_fields(stream, msg_id, fields_to_dict(flat), int(count)))
                    if cursor == "0-0":
                        break
            if time.monotonic() > janitor_at:
                janitor_at = time.monotonic() + JANITOR_EVERY_S
                await janitor(w)
        except ResponseError as exc:
            if server_refuses_writes(exc):  # a full disk: retried next round, the worker stays up
                log.warning("claiming abandoned jobs failed (%s); retrying", exc)
                continue
            if "NOGROUP" not in str(exc):
                raise
            await w.ensure_groups()
        except (RedisError, OSError) as exc:
            log.warning("claiming abandoned jobs failed (%s); retrying", exc)


async def janitor(w: Worker) -> None:
    """Forget consumers of workers that died long ago and own nothing (keeps XINFO readable)."""
    idle_ms = max(w.claim_idle_ms * 10, 600_000)
    for stream in w.specs:
        await w.scripts.janitor(keys=[stream], args=[GROUP, idle_ms, w.consumer])


async def promote_loop(w: Worker) -> None:
    """Move due delayed jobs and retry backoffs into their streams (any worker may; it is atomic)."""
    while not w.stopping.is_set():
        wait = 1.0
        try:
            moved, next_due, now = await w.scripts.promote(keys=[w.keys.delayed], args=[w.keys.prefix, 500])
            if int(moved) >= 500:
                continue
            if float(next_due) >= 0:
                wait = min(max((float(next_due) - float(now)) / 1000, 0.005), 1.0)
        except (RedisError, OSError) as exc:
            log.warning("promoting delayed jobs failed (%s); retrying", exc)
        w.promote_wake.clear()
        waiters = [asyncio.ensure_future(w.promote_wake.wait()), asyncio.ensure_future(w.stopping.wait())]
        await asyncio.wait(waiters, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        for f in waiters:
            f.cancel()


async def leave(w: Worker) -> None:
    """Graceful exit: delete our consumer from each group if we own nothing there any more (one round
    trip for all the streams: a gateway closes faster)."""
    try:
        async with w.redis.pipeline(transaction=False) as pipe:
            for stream in w.specs:
                await w.scripts.leave(keys=[stream], args=[GROUP, w.consumer], client=pipe)
            results = await pipe.execute(raise_on_error=False)
    except (RedisError, OSError) as exc:
        log.debug("leaving the consumer groups failed: %s", exc)
        return
    for stream, result in zip(w.specs, results, strict=False):
        if isinstance(result, Exception):
            log.debug("leaving %s failed: %s", stream, result)
