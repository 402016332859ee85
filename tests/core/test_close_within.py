"""The host fixture's bounded close: a gateway that never closes fails its test with the await chain of
every task still running, not a silent hang until the runner's timeout (which shows only idle threads)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.testing import close_within


class StuckGateway:
    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def close(self) -> None:
        await self._drain_jobs()

    async def _drain_jobs(self) -> None:
        await self.release.wait()


async def test_a_gateway_that_does_not_close_fails_with_every_tasks_await_chain() -> None:
    stuck = StuckGateway()
    with pytest.raises(AssertionError) as failed:
        await close_within(stuck, 0.05)
    assert "did not close within" in str(failed.value)
    assert "_drain_jobs" in str(failed.value) and "close" in str(failed.value)
    stuck.release.set()


async def test_a_gateway_that_closes_is_closed_once() -> None:
    stuck = StuckGateway()
    stuck.release.set()
    await close_within(stuck, 5)
