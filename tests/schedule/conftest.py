"""A gateway whose schedule runs on a hand-moved clock.

``ManualTimer`` stands in for the bus's delayed-job queue only (the seam ``engine.Timer``): it keeps
what was armed, with the bus's rule that arming one occurrence twice is one job, and ``walk`` moves
the clock to each armed instant in order and runs the real ``schedule_due`` handler there. Everything
else (files, parsing, the outbox, turns) is the real gateway's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.bus.clock import ManualClock
from gateway.schedule import engine
from gateway.schedule.items import Item, stamp
from gateway.testing import GatewayFactory


@dataclass
class ManualTimer:
    armed: dict[str, tuple[datetime, dict[str, Any]]] = field(default_factory=dict)

    async def arm(self, user_id: str, item: Item, due: datetime) -> None:
        job_id = f"sched:{user_id}:{item.kind}:{item.id}:{int(due.timestamp())}"
        self.armed.setdefault(job_id, (due, {"user_id": user_id, "kind": item.kind, "item_id": item.id,
                                             "due": stamp(due)}))


@dataclass
class Harness:
    gw: Gateway
    clock: ManualClock
    timer: ManualTimer
    fired: list[tuple[datetime, dict[str, Any]]] = field(default_factory=list)

    def user(self, account: str = "alice", tz: str = "UTC") -> str:
        from gateway.testing import message

        uid = self.gw.identities.resolve(message("hi", account=account)).user_id  # type: ignore[union-attr]
        self.gw.state.users.set_timezone(uid, tz)
        return uid

    def path(self, uid: str, rel: str) -> Path:
        return Path(self.gw.config.data_dir) / "users" / uid / rel

    def write(self, uid: str, rel: str, text: str) -> None:
        self.gw.memory_store(uid).write(rel, text, source="test")

    async def walk(self, until: datetime) -> list[datetime]:
        """Run every armed job due up to ``until`` in time order; the instants that delivered."""
        delivered = []
        while True:
            due = sorted((d, j) for j, (d, _) in self.timer.armed.items() if d <= until)
            if not due:
                break
            when, job_id = due[0]
            _, payload = self.timer.armed.pop(job_id)
            self.clock.set(max(when, self.clock.now()))
            if await engine.fire(self.gw, payload):
                delivered.append(when)
                self.fired.append((when, payload))
        self.clock.set(max(until, self.clock.now()))
        await engine.flush(self.gw)  # the fired occurrences are in the files
        return delivered


@pytest.fixture
async def harness(kith_gateway: GatewayFactory) -> Any:
    async def make(start: datetime, **overrides: Any) -> Harness:
        gw = await kith_gateway(**overrides)
        await gw.settle()  # the start-up sweep
        clock, timer = ManualClock(start), ManualTimer()
        sched = engine.schedule_of(gw)
        sched.clock, sched.timer = clock, timer
        return Harness(gw, clock, timer)

    return make


def outbox(gw: Gateway, uid: str, kind: str | None = None) -> list[Any]:
    return [e for e in gw.state.outbox.list_for(uid, limit=1000) if kind is None or e.kind == kind]
