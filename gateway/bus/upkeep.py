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
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError, ResponseError

from gateway.bus import owners
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


async def _slot_or_pause(w: Worker, seconds: float) -> None:
    """Sleep until a job slot frees (``claim_wake``, cleared when the round began), the worker stops,
    or ``seconds`` pass. It always yields to the loop, even when a slot freed meanwhile."""
    waiters = [asyncio.ensure_future(w.claim_wake.wait()), asyncio.ensure_future(w.stopping.wait())]
    try:
        await asyncio.wait(waiters, timeout=max(seconds, 0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in waiters:
            f.cancel()


def _run_claimed(w: Worker, stream: str, name: str, entries: list[Any], buried: int) -> None:
    """Start the deliveries a claim script handed over; say how many it dead-lettered instead."""
    if buried:
        log.error("%d %s jobs dead-lettered: delivery cap reached by lost workers", buried, name)
    for msg_id, count, flat in entries:
        w.spawn(Delivery.from_fields(stream, msg_id, fields_to_dict(flat), int(count)))


async def claim_from_gone(w: Worker) -> bool:
    """Take over the deliveries of this machine's workers whose process is gone (``owners.py``), as
    far as there is room. True when such a worker still owns deliveries there was no room for."""
    async with w.redis.pipeline(transaction=False) as pipe:
        for stream in w.specs:
            pipe.xinfo_consumers(stream, GROUP)
        listed = await pipe.execute(raise_on_error=False)
    taken, left = 0, False
    for (stream, spec), consumers in zip(w.specs.items(), listed, strict=True):
        if isinstance(consumers, Exception):
            continue  # no group yet (NOGROUP): nothing to take
        for consumer in consumers:
            if not int(consumer.get("pending", 0)) or not owners.is_gone(str(consumer["name"])):
                continue
            while True:
                room = w.room(stream)
                if room <= 0:
                    left = True
                    break
                entries, buried = await w.scripts.claim_from(
                    keys=[stream, w.keys.dead(spec.name)],
                    args=[GROUP, w.consumer, consumer["name"], room, w.max_tries(spec), w.keys.prefix],
                )
                _run_claimed(w, stream, spec.name, entries, buried)
                taken += len(entries)
                if len(entries) + int(buried) < room:
                    break
    if taken:
        log.info("took over %d jobs of workers on this machine that are gone", taken)
    return left


async def claim_loop(w: Worker) -> None:
    """XAUTOCLAIM each stream every interval, following its cursor across calls until it wraps to
    0-0; first, what workers of this machine that are gone still own.

    A stream whose round ran out of room (its concurrency cap, or no free slot) before its cursor
    wrapped is claimed again as soon as a slot frees, not a whole interval later: after a crash, a
    queue capped at 4 with 20 abandoned jobs was otherwise taken back 4 per interval (the index
    queue, 75 s of a restarted daemon's catch-up). Those rounds claim only such streams."""
    cursors = dict.fromkeys(w.specs, "0-0")
    interval = max(w.claim_idle_ms / 2000, 0.05)
    janitor_at = time.monotonic() + JANITOR_EVERY_S
    gone = True  # the deliveries of this machine's workers that are gone: at start, and until all taken
    more: set[str] = set()  # streams that ran out of room before their cursor wrapped
    next_full = time.monotonic()
    while not w.stopping.is_set():
        wait = next_full - time.monotonic()
        if gone or more:
            await _slot_or_pause(w, wait)
        else:
            await _pause(w, wait)
        if w.stopping.is_set():
            break
        w.claim_wake.clear()  # a slot freed from here on wakes the next wait at once
        now = time.monotonic()
        streams = list(w.specs) if now >= next_full else [s for s in w.specs if s in more]
        if now >= next_full:
            next_full = now + interval
        try:
            if gone:
                gone = await claim_from_gone(w)
            for stream in streams:
                spec = w.specs[stream]
                more.discard(stream)
                while not w.stopping.is_set():
                    room = w.room(stream)
                    if room <= 0:
                        if cursors[stream] != "0-0":
                            more.add(stream)
                        break
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
                    _run_claimed(w, stream, spec.name, entries, buried)
                    if cursor == "0-0":
                        break
            if time.monotonic() > janitor_at:
                janitor_at = time.monotonic() + JANITOR_EVERY_S
                await janitor(w)
        except ResponseError as exc:
            gone = False  # e.g. a server that cannot list consumers: the idle time will do
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
