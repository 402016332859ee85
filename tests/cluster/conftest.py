"""Cluster tests: a private redis-server per test (embedded, in the test's directory; never 6379)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aredis

from gateway.bus.server import EmbeddedRedis


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "shared")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def redis(redis_server: EmbeddedRedis) -> AsyncIterator[aredis.Redis]:
    client = aredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()
