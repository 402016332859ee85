"""The scheduler lease: one holder, strictly increasing fencing tokens, expiry, no deposed renewals."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aredis

from gateway.cluster.lease import Lease


async def test_one_holder_and_increasing_tokens(redis: aredis.Redis) -> None:
    a = Lease(redis, "scheduler", 0.5, holder="a")
    b = Lease(redis, "scheduler", 0.5, holder="b")
    first = await a.acquire()
    assert first is not None and a.held()
    assert await b.acquire() is None and not b.held()
    assert await a.acquire() == first  # asking again while holding keeps the same grant
    assert await a.release()
    second = await b.acquire()
    assert second is not None and second > first
    assert await b.current() == (b.holder, second)


async def test_expired_holder_cannot_renew_or_release_its_successor(redis: aredis.Redis) -> None:
    a = Lease(redis, "scheduler", 0.2, holder="a")
    b = Lease(redis, "scheduler", 0.2, holder="b")
    token_a = await a.acquire()
    assert token_a is not None
    deadline = time.monotonic() + 5
    token_b = None
    while token_b is None:  # a stops renewing (as if killed): b gets it once the TTL ran out
        assert time.monotonic() < deadline, "the lease never expired"
        await asyncio.sleep(0.02)
        token_b = await b.acquire()
    assert not a.held()  # a's local validity (80% of the TTL) ended before Redis let b in
    assert token_b > token_a
    assert not await a.renew()
    assert not await a.release()
    assert await b.still_current(token_b) and not await b.still_current(token_a)
    grants = await b.history()
    assert [g.token for g in grants] == [token_a, token_b]
    assert grants[1].acquired_ms >= grants[0].renewed_ms  # never two holders at once


async def test_renewal_keeps_it(redis: aredis.Redis) -> None:
    # A TTL of 2 s renewed every 0.2 s: a loaded run can hold this loop up for a few hundred ms, and a
    # shorter TTL then expired between two renewals (CI, parallel suite).
    a = Lease(redis, "scheduler", 2.0, holder="a")
    b = Lease(redis, "scheduler", 2.0, holder="b")
    token = await a.acquire()
    for _ in range(12):  # 2.4 s, longer than the TTL
        await asyncio.sleep(0.2)
        assert await a.renew()
        assert await b.acquire() is None
    assert a.token == token and a.held()
