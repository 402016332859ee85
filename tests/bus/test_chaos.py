"""Chaos (``pytest -m chaos -s``): SIGKILL workers 100 times, then redis-server 10 times.

Every acknowledged enqueue must end with exactly one effect or a dead letter: none lost, none
doubled. Figures are printed (run with -s) and recorded in docs/jobs.md.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from pathlib import Path

import pytest

from gateway.bus import BusError, JobBus
from gateway.configread import parse_config

from .chaos_worker import SCHEMA
from .procs import Workers

ROOT = Path(__file__).resolve().parents[2]
JOBS = 1000
pytestmark = pytest.mark.chaos


def effects(db: Path) -> tuple[dict[str, int], int]:
    con = sqlite3.connect(db, timeout=30)
    try:
        rows = dict(con.execute("SELECT job_id, COUNT(*) FROM effects GROUP BY job_id").fetchall())
        executions = con.execute("SELECT COUNT(*) FROM executions").fetchone()[0]
        return rows, executions
    finally:
        con.close()


async def produce(bus: JobBus, acked: list[str], rate: float, times: list[float] | None = None) -> int:
    """Enqueue JOBS jobs; an id counts as acknowledged only once enqueue returned. Failed attempts
    (server down) are retried with the same job id, which is what makes the retry safe."""
    failures = 0
    for i in range(JOBS):
        job_id = f"e{i}"
        while True:
            try:
                await bus.enqueue("effect", {"n": i}, job_id=job_id)
                break
            except BusError:
                failures += 1
                await asyncio.sleep(0.05)
        acked.append(job_id)
        if times is not None:
            times.append(time.monotonic())
        await asyncio.sleep(1 / rate)
    return failures


async def settle(bus: JobBus, db: Path, acked: list[str], timeout: float) -> tuple[dict[str, int], set[str], int]:
    deadline = time.monotonic() + timeout
    while True:
        rows, executions = await asyncio.to_thread(effects, db)
        dead = {d.job_id for d in await bus.dead(limit=JOBS)}
        if set(rows) | dead >= set(acked) or time.monotonic() > deadline:
            return rows, dead, executions
        await asyncio.sleep(0.25)


async def check(bus: JobBus, rows: dict[str, int], dead: set[str], acked: list[str]) -> dict[str, int]:
    lost = set(acked) - set(rows) - dead
    doubled = {j: n for j, n in rows.items() if n > 1}
    both = set(rows) & dead
    stream = bus.keys.stream("effect")
    leftovers = await bus.redis.xlen(stream)
    pending = (await bus.redis.xpending(stream, "workers"))["pending"]
    records = len([k async for k in bus.redis.scan_iter(match=bus.keys.job("*"), count=1000)])
    assert not lost, f"{len(lost)} acknowledged jobs lost: {sorted(lost)[:10]}"
    assert not doubled, f"duplicate effects: {doubled}"
    assert not both, f"jobs with an effect and a dead letter: {both}"
    assert (leftovers, pending, records) == (0, 0, 0)
    return {"acked": len(acked), "effects": len(rows), "dead": len(dead), "lost": 0, "duplicate_effects": 0}


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "effects.sqlite"
    con = sqlite3.connect(db)
    con.executescript(SCHEMA)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    return tmp_path / "data", db


async def test_sigkill_workers_100_times(tmp_path: Path) -> None:
    data_dir, db = _setup(tmp_path)
    config = parse_config({"data_dir": str(data_dir), "bus": {"claim_idle_ms": 1000}}, env={})
    async with JobBus(config) as bus:
        workers = Workers(data_dir, db, tmp_path)
        await asyncio.gather(workers.start(0), workers.start(1))
        acked: list[str] = []
        t0 = time.monotonic()
        producer = asyncio.create_task(produce(bus, acked, rate=30))
        for _ in range(100):
            await asyncio.sleep(random.uniform(0.1, 0.4))
            await workers.kill_random()
        await producer
        rows, dead, executions = await settle(bus, db, acked, timeout=120)
        wall = time.monotonic() - t0
        await workers.stop()
        figures = await check(bus, rows, dead, acked)
    figures |= {
        "worker_kills": 100,
        "worker_starts": workers.starts,
        "executions": executions,
        "redeliveries": executions - len(rows) - len(dead),
        "wall_s": round(wall, 1),
    }
    print("\nCHAOS workers", json.dumps(figures))


async def test_sigkill_redis_server_10_times(tmp_path: Path) -> None:
    data_dir, db = _setup(tmp_path)
    config = parse_config({"data_dir": str(data_dir), "bus": {"claim_idle_ms": 1000}}, env={})
    async with JobBus(config) as bus:
        assert bus.server is not None
        workers = Workers(data_dir, db, tmp_path)
        await asyncio.gather(workers.start(0), workers.start(1))
        acked: list[str] = []
        ack_times: list[float] = []
        kills: list[float] = []
        t0 = time.monotonic()
        producer = asyncio.create_task(produce(bus, acked, rate=120, times=ack_times))
        for _ in range(10):
            await asyncio.sleep(random.uniform(0.3, 0.9))
            bus.server.kill()  # SIGKILL: no shutdown, no final fsync
            kills.append(time.monotonic())
            await asyncio.sleep(random.uniform(0.05, 0.3))
            await bus.server.start()  # replays the AOF
        failures = await producer
        rows, dead, executions = await settle(bus, db, acked, timeout=120)
        wall = time.monotonic() - t0
        await workers.stop()
        figures = await check(bus, rows, dead, acked)
    # Acknowledged inside the last second before a kill: what an everysec fsync may not have synced.
    at_risk = sum(any(0 <= k - t < 1.0 for k in kills) for t in ack_times)
    figures |= {
        "server_kills": 10,
        "acked_within_1s_before_a_kill": at_risk,
        "enqueue_failures_retried": failures,
        "executions": executions,
        "redeliveries": executions - len(rows) - len(dead),
        "wall_s": round(wall, 1),
    }
    print("\nCHAOS redis", json.dumps(figures))
