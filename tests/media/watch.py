"""How responsive the daemon stays while a file is read: the event loop's longest stall, the
slowest ``/healthz`` answer, and how much the test process's peak memory grew."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp

TICK_S = 0.01


@dataclass
class Watch:
    max_stall_s: float = 0.0  # longest time the loop did not come back to a 10 ms timer (beyond the 10 ms)
    max_healthz_s: float = 0.0  # slowest /healthz answer
    healthz_calls: int = 0
    peak_growth_bytes: int = 0  # growth of this process's peak resident size while watched


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextlib.asynccontextmanager
async def watching(healthz_url: str = "") -> AsyncIterator[Watch]:
    watch = Watch()
    peak_before = _peak_rss()

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            watch.max_stall_s = max(watch.max_stall_s, now - last - TICK_S)
            last = now

    async def poller() -> None:
        async with aiohttp.ClientSession() as http:
            while True:
                start = time.monotonic()
                async with http.get(healthz_url) as resp:
                    await resp.read()
                watch.max_healthz_s = max(watch.max_healthz_s, time.monotonic() - start)
                watch.healthz_calls += 1
                await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(ticker())]
    if healthz_url:
        tasks.append(asyncio.create_task(poller()))
    try:
        yield watch
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        watch.peak_growth_bytes = _peak_rss() - peak_before
