"""``queue_busy``: what ``Gateway.settle`` polls, against a real server."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.bus import JobContext
from gateway.bus.status import queue_busy
from gateway.config import Config

from .conftest import eventually, new_bus, running, spec


async def test_busy_while_a_job_is_queued_or_running_not_while_delayed(config: Config) -> None:
    release = asyncio.Event()
    started: list[int] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        started.append(payload["n"])
        await release.wait()

    bus = await new_bus(config, [spec("slow", handler), spec("later", handler)])
    try:

        async def busy() -> bool:
            return await queue_busy(bus.redis, bus.keys, bus.specs)

        assert not await busy()
        await bus.enqueue("later", {"n": 0}, delay=3600)  # delayed only: settle does not wait for it
        assert not await busy()
        await bus.enqueue("slow", {"n": 1})
        assert await busy()  # queued, no worker yet
        async with running(bus):
            await eventually(lambda: started == [1])
            assert await busy()  # in flight
            release.set()

            async def idle() -> bool:
                return not await busy()

            await eventually(idle)
        assert [s.delayed for s in await bus.status() if s.name == "later"] == [1]
    finally:
        await bus.close()
