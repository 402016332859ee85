"""Distributed locks: exclusive, token-checked release, renewed while held, freed by a dead holder's TTL."""

from __future__ import annotations

import asyncio

import pytest
import redis as sync_redis
import redis.asyncio as aredis

from gateway.bus.server import EmbeddedRedis
from gateway.cluster.locks import LockTimeout, redis_lock, sync_redis_lock


async def test_exclusive_and_in_order(redis: aredis.Redis) -> None:
    inside = 0
    most = 0
    order: list[int] = []

    async def turn(i: int) -> None:
        nonlocal inside, most
        async with redis_lock(redis, "k:turn:u1", ttl=5):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.005)
            order.append(i)
            inside -= 1

    await asyncio.gather(*(turn(i) for i in range(20)))
    assert most == 1 and sorted(order) == list(range(20))
    assert await redis.get("k:turn:u1") is None


@pytest.mark.serial  # renewals every 0.1 s against a 0.3 s TTL: a loaded machine lets the lock lapse
async def test_long_hold_is_renewed(redis: aredis.Redis) -> None:
    async with redis_lock(redis, "k:long", ttl=0.3) as held:
        await asyncio.sleep(0.9)  # three TTLs: still ours
        assert await redis.get("k:long") == held.token
        with pytest.raises(LockTimeout):
            async with redis_lock(redis, "k:long", ttl=0.3, wait=0.2):
                pass
    assert not held.lost


async def test_dead_holders_lock_frees_after_ttl_and_release_checks_token(redis: aredis.Redis) -> None:
    await redis.set("k:dead", "someone-else", px=200)  # a holder that was killed: never releases
    async with redis_lock(redis, "k:dead", ttl=5, wait=5) as held:
        assert await redis.get("k:dead") == held.token
        await redis.set("k:dead", "thief")  # (simulated expiry and a new holder)
    assert await redis.get("k:dead") == "thief"  # our release did not free someone else's lock


async def test_sync_lock(redis_server: EmbeddedRedis) -> None:
    client = sync_redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        with sync_redis_lock(client, "k:file", ttl=5) as held:
            assert client.get("k:file") == held.token
            with pytest.raises(LockTimeout), sync_redis_lock(client, "k:file", ttl=5, wait=0.1):
                pass
        assert client.get("k:file") is None
    finally:
        client.close()
