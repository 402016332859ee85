"""Distributed locks on Redis: ``redis_lock`` (async, renewed while held) and ``sync_redis_lock``.

A lock is ``SET key token NX PX ttl``; release deletes the key only while it still holds our random
token (one script), so a holder whose lock ran out never frees the next holder's. A long hold is kept
by renewing every ``ttl / 3`` (compare and ``PEXPIRE``); a holder that dies (SIGKILL) frees the lock
when its TTL runs out. Waiting polls with a short, growing pause (2 ms up to 50 ms): contention on one
key is rare (one person's turns, one file's writes), so a wake-up channel would cost more than it saves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import redis as sync_redis
from redis.asyncio import Redis

log = logging.getLogger("kith.cluster.locks")

_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_EXTEND = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
_FIRST_PAUSE, _MAX_PAUSE = 0.002, 0.05


class LockTimeout(Exception):
    """The lock was not free within the wait."""

    def __init__(self, key: str, waited: float) -> None:
        super().__init__(f"lock {key} still held by another node after {waited:.1f}s")
        self.key = key


@dataclass(slots=True)
class HeldLock:
    key: str
    token: str
    lost: bool = False  # a renewal found the lock gone (expired and taken): the hold was not exclusive
    # The block ended: the renewer stops on this, not only on its cancel, which a Redis call can turn
    # into a ConnectionError that the retry below would swallow (then ``gather`` on it never returned).
    done: bool = False


@contextlib.asynccontextmanager
async def redis_lock(redis: Redis, key: str, ttl: float = 30.0, *, wait: float | None = 60.0,
                     renew: bool = True) -> AsyncIterator[HeldLock]:
    """Hold ``key`` for the block. ``wait``: seconds to wait for it (None: forever), then
    ``LockTimeout``; ``renew``: keep extending while the block runs, so a hold may outlast ``ttl``."""
    held = await acquire(redis, key, ttl, wait=wait)
    renewer = keep(redis, held, ttl) if renew else None
    try:
        yield held
    finally:
        held.done = True
        if renewer is not None:
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
        await release(redis, held, ttl)


async def acquire(redis: Redis, key: str, ttl: float, *, wait: float | None) -> HeldLock:
    """Take ``key`` (``SET NX PX``), polling while another holder has it; ``LockTimeout`` after ``wait``."""
    held = HeldLock(key, secrets.token_hex(8))
    ttl_ms = math.ceil(ttl * 1000)
    start = time.monotonic()
    pause = _FIRST_PAUSE
    while not await redis.set(key, held.token, nx=True, px=ttl_ms):
        if wait is not None and time.monotonic() - start > wait:
            raise LockTimeout(key, time.monotonic() - start)
        await asyncio.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE)
    return held


async def release(redis: Redis, held: HeldLock, ttl: float) -> None:
    """Free the lock if it is still ours (never a later holder's)."""
    try:
        await redis.eval(_RELEASE, 1, held.key, held.token)
    except Exception as exc:  # the TTL frees it: never turn a finished block into an error
        log.warning("releasing lock %s failed (%s); it expires in %.0fs", held.key, exc, ttl)


def keep(redis: Redis, held: HeldLock, ttl: float) -> asyncio.Task[None]:
    """Renew ``held`` every ``ttl / 3`` until ``held.done`` is set and the returned task cancelled."""
    return asyncio.create_task(_keep(redis, held, ttl), name=f"lock:{held.key}")


async def _keep(redis: Redis, held: HeldLock, ttl: float) -> None:
    ttl_ms = str(math.ceil(ttl * 1000))
    while not held.done:
        await asyncio.sleep(ttl / 3)
        if held.done:
            return
        try:
            if not int(await redis.eval(_EXTEND, 1, held.key, held.token, ttl_ms)):
                held.lost = True
                log.error("lock %s expired while held (the holder was stalled past its TTL)", held.key)
                return
        except Exception as exc:
            log.warning("renewing lock %s failed (%s); retrying", held.key, exc)


@contextlib.contextmanager
def sync_redis_lock(client: sync_redis.Redis, key: str, ttl: float = 30.0, *,
                    wait: float | None = 60.0) -> Iterator[HeldLock]:
    """``redis_lock`` for synchronous code (the guarded memory store's writes run in threads and on
    the loop); no renewal: hold it for short writes only, well under ``ttl``."""
    held = HeldLock(key, secrets.token_hex(8))
    ttl_ms = math.ceil(ttl * 1000)
    start = time.monotonic()
    pause = _FIRST_PAUSE
    while not client.set(key, held.token, nx=True, px=ttl_ms):
        if wait is not None and time.monotonic() - start > wait:
            raise LockTimeout(key, time.monotonic() - start)
        time.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE)
    try:
        yield held
    finally:
        try:
            client.eval(_RELEASE, 1, key, held.token)
        except Exception as exc:
            log.warning("releasing lock %s failed (%s); it expires in %.0fs", key, exc, ttl)
