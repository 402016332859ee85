"""A worker takes over at once the deliveries of this machine's workers whose process is gone
(``gateway/bus/owners.py``), and nothing from a worker that may be alive; a queue at its concurrency
cap gets its abandoned jobs back as its slots free, not one cap's worth per claim interval."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gateway.bus import JobBus, JobContext, owners
from gateway.bus.keys import GROUP

from .conftest import bus_config, eventually, new_bus, running, spec

IDLE_MS = 60_000  # far beyond every wait below: only a takeover can run these jobs in time


def gone_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def consumer(pid: int, *, host: str | None = None, space: str | None = None) -> str:
    return f"{host or socket.gethostname()}:{pid}:abc123:{owners._SPACE if space is None else space}"


async def deliver_to(bus: JobBus, name: str, owner: str, jobs: int) -> None:
    """Enqueue ``jobs`` jobs and hand them to ``owner``, as XREADGROUP does for a worker that then dies."""
    stream = bus.keys.stream(name)
    await bus.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
    for n in range(jobs):
        await bus.enqueue(name, {"n": n}, job_id=f"{name}-{n}")
    got = await bus.redis.xreadgroup(GROUP, owner, {stream: ">"}, count=jobs)
    assert sum(len(entries) for _, entries in got) == jobs


def test_only_a_consumer_certainly_gone_is_taken_for_dead() -> None:
    mine = owners.new_consumer()
    try:
        assert not owners.is_gone(mine)  # a live worker of this process
        assert owners.is_gone(consumer(gone_pid()))
        assert owners.is_gone(consumer(os.getpid()))  # our pid, not our name: an earlier process's
        assert not owners.is_gone(consumer(os.getppid()))  # that process exists
        assert not owners.is_gone(consumer(gone_pid(), host="another-machine"))
        assert not owners.is_gone(consumer(gone_pid(), space="0badf00d"))  # another PID namespace or boot
        assert not owners.is_gone(f"{socket.gethostname()}:{gone_pid()}:abc123")  # an older kith's name
    finally:
        owners.release(mine)
    assert owners.is_gone(mine)  # its worker ended: what it still owns is nobody's


async def test_a_dead_workers_jobs_run_at_once_and_a_live_ones_wait(tmp_path: Path) -> None:
    ran: list[int] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        ran.append(payload["n"])

    config = bus_config(tmp_path, claim_idle_ms=IDLE_MS)
    bus = await new_bus(config, [spec("dead", handler), spec("alive", handler)])
    try:
        await deliver_to(bus, "dead", consumer(gone_pid()), 3)
        await deliver_to(bus, "alive", consumer(os.getppid()), 2)
        started = time.monotonic()
        async with running(bus):
            await eventually(lambda: len(ran) == 3, timeout=10)
            await asyncio.sleep(0.5)
        assert time.monotonic() - started < IDLE_MS / 1000
        assert sorted(ran) == [0, 1, 2]  # the live worker's two were left to it
        pending = await bus.redis.xpending(bus.keys.stream("alive"), GROUP)
        assert pending["pending"] == 2
    finally:
        await bus.close()


async def test_a_capped_queue_gets_all_its_abandoned_jobs_back_as_slots_free(tmp_path: Path) -> None:
    """Ten abandoned jobs of a queue capped at two: taken back two at a time as each pair ends."""
    running_now: list[int] = []
    most = 0
    done: list[int] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        nonlocal most
        running_now.append(payload["n"])
        most = max(most, len(running_now))
        await asyncio.sleep(0.1)
        running_now.remove(payload["n"])
        done.append(payload["n"])

    config = bus_config(tmp_path, claim_idle_ms=IDLE_MS)
    bus = await new_bus(config, [spec("capped", handler, concurrency=2)])
    try:
        await deliver_to(bus, "capped", consumer(gone_pid()), 10)
        async with running(bus):
            await eventually(lambda: len(done) == 10, timeout=15)
        assert sorted(done) == list(range(10))
        assert most <= 2
    finally:
        await bus.close()


async def test_idle_deliveries_of_a_capped_queue_are_claimed_as_slots_free(tmp_path: Path) -> None:
    """Abandoned by a worker on another machine (left to the idle time): once idle, the ten come back
    as the cap allows, not two per claim interval (which would take four more intervals)."""
    done: list[int] = []

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        await asyncio.sleep(0.05)
        done.append(payload["n"])

    idle_ms = 3000
    interval = idle_ms / 2000
    config = bus_config(tmp_path, claim_idle_ms=idle_ms)
    bus = await new_bus(config, [spec("capped", handler, concurrency=2)])
    try:
        await deliver_to(bus, "capped", consumer(gone_pid(), host="another-machine"), 10)
        async with running(bus):
            await eventually(lambda: done, timeout=idle_ms / 1000 + 3 * interval)
            first = time.monotonic()
            await eventually(lambda: len(done) == 10, timeout=15)
            assert time.monotonic() - first < 2 * interval
        assert sorted(done) == list(range(10))
    finally:
        await bus.close()
