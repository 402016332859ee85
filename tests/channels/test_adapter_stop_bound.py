"""An adapter's ``stop()`` is bounded, at a restart and at shutdown.

Regression (issue 26's flake hunt): ``Gateway.close()`` after a Discord restart mid-turn once took
over 24 s, stuck in the supervisor gathering the adapters' tasks: each task awaited its adapter's
``stop()`` without a bound, and nothing bounded a run that did not end when cancelled. Adapters are
third-party code that closes connections to peers; none of that may hold up a restart or shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from gateway.adapter import Adapter
from gateway.supervisor import Supervisor
from gateway.types import ConversationAddress, Reply
from tests.channels.rig import wait_for

BOUND_S = 0.3


class SlowGoodbye(Adapter):
    """Serves until told to fail; its ``stop()`` never returns by itself (a peer that never answers)."""

    name = "slow"

    def __init__(self, *, fail_first: bool = False, ignore_cancel: int = 0) -> None:
        super().__init__(gateway=None, config=None)  # type: ignore[arg-type]
        self.runs = 0
        self.stops = 0
        self.fail_first = fail_first
        self.ignore_cancel = ignore_cancel

    async def run(self) -> None:
        self.runs += 1
        self.mark_connected()
        if self.fail_first and self.runs == 1:
            raise ConnectionError("the platform went away")
        ignored = 0
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                if ignored == self.ignore_cancel:
                    raise
                ignored += 1  # a run that swallows its first cancels

    async def stop(self) -> None:
        self.stops += 1
        await asyncio.Event().wait()

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        return None


async def timed_stop(sup: Supervisor) -> float:
    started = time.monotonic()
    await asyncio.wait_for(sup.stop(), 10)  # a hang fails here instead of hanging the suite
    return time.monotonic() - started


async def test_shutdown_does_not_wait_for_a_stop_that_hangs(caplog: pytest.LogCaptureFixture) -> None:
    adapter = SlowGoodbye()
    sup = Supervisor(stop_wait_s=BOUND_S)
    sup.start({"slow": adapter})
    await wait_for(lambda: sup.health()["slow"]["state"] == "running", timeout=5)
    with caplog.at_level(logging.WARNING, logger="kith.supervisor"):
        took = await timed_stop(sup)
    assert adapter.stops == 1
    assert took < BOUND_S + 1.0, f"shutdown waited {took:.1f} s for an adapter's stop()"
    assert sup.health()["slow"]["state"] == "stopped"
    assert any("adapter slow did not stop within" in r.getMessage() for r in caplog.records)


async def test_a_restart_does_not_wait_for_a_stop_that_hangs(caplog: pytest.LogCaptureFixture) -> None:
    adapter = SlowGoodbye(fail_first=True)
    sup = Supervisor(base_delay=0.01, max_delay=0.02, stop_wait_s=BOUND_S)
    with caplog.at_level(logging.WARNING, logger="kith.supervisor"):
        sup.start({"slow": adapter})
        try:
            # The first run fails; its stop() hangs; the second run starts once the bound has passed.
            await wait_for(lambda: adapter.runs == 2, timeout=BOUND_S + 3, what="the second run")
            assert sup.health()["slow"]["restarts"] == 1
        finally:
            await timed_stop(sup)
    assert any("adapter slow did not stop within" in r.getMessage() for r in caplog.records)


async def test_a_run_that_ignores_its_cancel_does_not_hold_up_shutdown(caplog: pytest.LogCaptureFixture) -> None:
    adapter = SlowGoodbye(ignore_cancel=1)
    sup = Supervisor(stop_wait_s=BOUND_S)
    sup.start({"slow": adapter})
    await wait_for(lambda: sup.health()["slow"]["state"] == "running", timeout=5)
    with caplog.at_level(logging.WARNING, logger="kith.supervisor"):
        took = await timed_stop(sup)
    # The bound for the task (stop_wait_s + 1 s), then a second cancel ends it.
    assert took < BOUND_S + 2.5, f"shutdown waited {took:.1f} s for a run that ignored its cancel"
    assert any("adapter:slow did not end within" in r.getMessage() for r in caplog.records)



async def test_shutdown_during_a_restart_whose_old_run_will_not_end(caplog: pytest.LogCaptureFixture) -> None:
    adapter = SlowGoodbye(ignore_cancel=2)  # the restart's cancel, and shutdown's, are both swallowed
    adapter.stall_after_s = 0.2
    sup = Supervisor(watchdog_interval=0.05, stop_wait_s=BOUND_S)
    sup.start({"slow": adapter})
    await wait_for(lambda: sup.health()["slow"]["restarts"] == 1, timeout=5, what="the watchdog's restart")
    with caplog.at_level(logging.WARNING, logger="kith.supervisor"):
        took = await timed_stop(sup)
    assert took < BOUND_S + 2.5, f"shutdown waited {took:.1f} s for a restart whose old run would not end"
    assert adapter.runs == 1, "shutdown started a new run"
    assert any("adapter-restart:slow did not end within" in r.getMessage() for r in caplog.records)
