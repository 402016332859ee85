"""``/healthz`` says ``running`` only once an adapter is connected, not while it is still connecting.

Regression: the supervisor set STARTING then RUNNING with no await in between, so health reported an
adapter running while its login was still in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.adapter import Adapter
from gateway.supervisor import Supervisor
from gateway.types import ConversationAddress, Reply


class SlowLogin(Adapter):
    name = "slow"

    def __init__(self) -> None:
        super().__init__(gateway=None, config=None)  # type: ignore[arg-type]
        self.login_done = asyncio.Event()
        self.stop_serving = asyncio.Event()

    async def run(self) -> None:
        await self.login_done.wait()  # a platform login in flight
        self.mark_connected()
        await self.stop_serving.wait()

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        return None


async def until(pred: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the supervisor never reached the expected state")


async def test_health_says_starting_until_the_adapter_is_connected() -> None:
    adapter = SlowLogin()
    sup = Supervisor(base_delay=0.01, max_delay=0.02)
    sup.start({"slow": adapter})
    try:
        await asyncio.sleep(0.1)
        assert sup.health()["slow"]["state"] == "starting"
        adapter.login_done.set()
        await until(lambda: sup.health()["slow"]["state"] == "running")
        # A restart goes through "starting" again until the new run has connected.
        adapter.login_done.clear()
        adapter.stop_serving.set()
        await until(lambda: sup.health()["slow"]["restarts"] == 1)
        adapter.stop_serving.clear()
        await until(lambda: sup.health()["slow"]["state"] == "starting")
        adapter.login_done.set()
        await until(lambda: sup.health()["slow"]["state"] == "running")
    finally:
        await sup.stop()
    assert sup.health()["slow"]["state"] == "stopped"
