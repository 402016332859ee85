"""The scheduler's work per tick follows what is due, not how many users exist (issue 12, item 8).

It used to read every user every minute (with 100,000 users the loop stalled for seconds every
minute, and a flood of new users made it worse). These tests count what a tick reads: the users it
looks at (``Scheduler.visited``) and the SQLite virtual-machine steps it costs, with 10x more users.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.bus import JobBus, JobContext, ManualClock
from gateway.bus.scheduler import Scheduler
from gateway.config import Config
from gateway.state import State, open_state, ts
from gateway.state.sqlite import SqliteState

from .conftest import new_bus, spec


async def _noop(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def add_users(state: SqliteState, count: int, tz: str, created: datetime) -> list[str]:
    ids = [f"u{uuid.uuid4().hex[:12]}" for _ in range(count)]
    with state.tx():
        state.db.executemany("INSERT INTO users(user_id, display_name, timezone, created_at) VALUES (?,?,?,?)",
                             [(i, "", tz, ts(created)) for i in ids])
    return ids


async def sqlite_steps(state: SqliteState, sched: Scheduler) -> int:
    """SQLite VM instructions (in hundreds) one tick costs."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    state.db.set_progress_handler(count, 100)
    try:
        await sched.tick()
    finally:
        state.db.set_progress_handler(None, 100)
    return steps


def sqlite_state(tmp_path: Path) -> SqliteState:
    state: State = open_state(tmp_path / "state.sqlite")
    assert isinstance(state, SqliteState)  # these tests count the SQLite VM steps a tick costs
    return state


async def fired(bus: JobBus, name: str) -> list[dict[str, Any]]:
    return [json.loads(f["payload"]) for _, f in await bus.redis.xrange(bus.keys.stream(name))]


async def at(sched: Scheduler, clock: ManualClock, when: datetime) -> int:
    clock.set(when)
    await sched.tick()
    return sched.visited


@pytest.mark.long
async def test_quiet_minutes_read_no_user_and_cost_the_same_with_ten_times_the_users(
    config: Config, tmp_path: Path
) -> None:
    state = sqlite_state(tmp_path)
    t0 = utc(2024, 5, 1, 1, 30)
    add_users(state, 1_000, "UTC", t0 - timedelta(days=1))
    kolkata = add_users(state, 500, "Asia/Kolkata", t0 - timedelta(days=1))  # UTC+05:30: slots at :30
    specs = [spec("hourly", _noop, cron="0 * * * *"), spec("nightly", _noop, cron="0 3 * * *")]
    clock = ManualClock(t0)
    bus = await new_bus(config, specs, users_provider=lambda: state.users, clock=clock)
    try:
        sched = bus.make_scheduler()
        assert await at(sched, clock, t0) == 1_500  # a scheduler's first tick goes through everyone once
        assert await at(sched, clock, utc(2024, 5, 1, 1, 31)) == 0
        clock.set(utc(2024, 5, 1, 1, 32))
        small = await sqlite_steps(state, sched)
        assert sched.visited == 0

        # ten times the users: new ones are read once, by the tick after they appear
        later = add_users(state, 13_500, "UTC", utc(2024, 5, 1, 1, 32, 30))
        assert await at(sched, clock, utc(2024, 5, 1, 1, 33)) == 13_500
        assert await at(sched, clock, utc(2024, 5, 1, 1, 34)) == 0
        clock.set(utc(2024, 5, 1, 1, 35))
        large = await sqlite_steps(state, sched)
        assert sched.visited == 0
        assert large <= small + 2, (small, large)  # index seeks: the same handful of steps

        # a slot that moves in one zone reads that zone's users, and only them
        assert await at(sched, clock, utc(2024, 5, 1, 2, 0)) == 14_500  # hourly, UTC
        assert await at(sched, clock, utc(2024, 5, 1, 2, 1)) == 0
        assert await at(sched, clock, utc(2024, 5, 1, 2, 30)) == 500  # hourly, Kolkata (08:00 local)
        hourly = await fired(bus, "hourly")
        assert len(hourly) == 15_000
        assert {p["user_id"] for p in hourly if p["tz"] == "Asia/Kolkata"} == set(kolkata)
        # the new users started with the next slot, like everyone
        new_users = set(later)  # once: made again for each of the 15,000 jobs, it was 11 s of CPU
        assert {p["slot"] for p in hourly if p["user_id"] in new_users} == {"2024-05-01T02:00"}
    finally:
        await bus.close()
        state.close()


async def test_reading_every_user_is_what_the_list_provider_costs(config: Config, tmp_path: Path) -> None:
    """The contrast: a provider returning every (user, timezone) reads them all each minute, which is
    what the daemon did before it handed the scheduler its State."""
    state = sqlite_state(tmp_path)
    add_users(state, 3_000, "UTC", utc(2024, 4, 1))
    clock = ManualClock(utc(2024, 5, 1, 1, 30))

    def every_user() -> list[tuple[str, str]]:
        return [(u.user_id, u.timezone) for u in state.users.all()]

    specs = [spec("hourly", _noop, cron="0 * * * *")]
    bus = await new_bus(config, specs, clock=clock)
    try:
        steps = []
        providers: list[Callable[[], Any]] = [every_user, lambda: state.users]
        for provider in providers:
            sched = Scheduler(bus.redis, bus.scripts, bus.keys, specs, users_provider=provider, clock=clock)
            clock.set(utc(2024, 5, 1, 1, 30))
            await sched.tick()
            clock.set(utc(2024, 5, 1, 1, 31))
            steps.append(await sqlite_steps(state, sched))
        listing, directory = steps
        assert listing > 50 * max(directory, 1), steps
    finally:
        await bus.close()
        state.close()
