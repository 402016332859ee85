"""``kith bench schedule``: how late scheduled items are delivered, and what the scheduling costs at rest.

**Lateness.** A real gateway (state, memory, job bus with its embedded Redis, the schedule engine,
the delivery outbox) on a temporary data directory. ``--users`` people (1,000) each get
``--items`` one-shot reminders (10) in their ``REMINDERS.md``, due at random instants in a
``--spread`` second window (60 s) starting ``--lead`` seconds (40 s) after the files are written;
``gateway.schedule.engine.sync_user`` arms each as a delayed bus job, the way a tool write or a
start-up does. Each fires through the ``schedule_due`` job, ``gateway.delivery.outbox.deliver`` and
a channel adapter that records when it was handed the message. Lateness = that instant - the due
instant (due times have whole-second resolution, as in the file). Goal: p99 <= 1 s.
``lateness_outbox_only``: the same items and due times as delayed bus jobs that call the outbox
directly (no schedule files): what the bus and the delivery outbox cost without the engine's file
bookkeeping.

**At rest.** A second gateway with ``--idle-users`` people (100,000), 1% of them with a reminder
armed for later, runs two windows of ``--idle-seconds`` (60) with nothing due: the bus scheduler's
ticks (cron jobs per user in their time zones; the first window includes its first sight of the
100,000 new people), the schedule engine and the outbox sweep. Each reports the process's CPU
seconds per minute and the event loop's stalls (a 20 ms ticker's worst and p99 lateness, and the CPU
the loop's thread used between two ticks: the wall-clock stall also counts time a loaded machine did
not run the process at all).
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import random
import resource
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from bench.common import machine, percentile
from gateway.adapter import Adapter, AdapterRegistry
from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.delivery.outbox import deliver
from gateway.hookspecs import hookimpl
from gateway.types import ConversationAddress, Reply

SINK = "benchsink"


class Sink(Adapter):
    """A channel that notes when each message reached it (the platform's side is not measured)."""

    name: ClassVar[str] = SINK
    received: ClassVar[dict[str, float]] = {}

    async def run(self) -> None:
        self.mark_connected()
        await asyncio.Event().wait()

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        Sink.received.setdefault(reply.text, time.time())


async def bench_deliver(ctx: Any, payload: dict[str, Any]) -> None:
    """The outbox alone: a delayed bus job per item hands it to ``deliver`` (no schedule files)."""
    await deliver(ctx.gateway, user_id=payload["user_id"], text=payload["text"], kind="reminder", origin=None,
                  delivery_id=payload["id"])  # fmt: skip


class SinkPlugin:
    @hookimpl
    def gateway_register_adapters(self, register: AdapterRegistry) -> None:
        register(Sink)

    @hookimpl
    def gateway_register_jobs(self, register: Any) -> None:
        register(bench_deliver, name="bench_deliver", timeout=60)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--items", type=int, default=10, help="reminders per user")
    parser.add_argument("--spread", type=float, default=60.0, help="seconds over which the items come due")
    parser.add_argument("--lead", type=float, default=40.0, help="seconds from writing the files to the first due")
    parser.add_argument("--idle-users", type=int, default=100_000)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--part", choices=("all", "lateness", "outbox", "rest"), default="all",
                        help="run one part only (lateness: the full path; outbox: the outbox alone; rest: at rest)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")


def _config(data: Path) -> Any:
    # memory.watch_files off: the bench writes 1,000 people's files by hand as its set-up; re-indexing
    # them all at once is not the schedule's cost (the schedule's own watch still sees hand edits).
    return parse_config({
        "data_dir": str(data), "llm": {"provider": "echo"}, "log_level": "WARNING",
        "plugins": {"entry_points": False}, "background": {"writer": {"enabled": False}},
        "memory": {"watch_files": False},
    }, env={})  # fmt: skip


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _reminders(user: int, items: int, start: datetime, spread: float,
               rng: random.Random) -> tuple[str, dict[str, float]]:  # fmt: skip
    lines, due = ["# Reminders", ""], {}
    for k in range(items):
        when = (start + timedelta(seconds=rng.uniform(0, spread))).replace(microsecond=0)
        text = f"bench {user}-{k}"
        lines.append(f"- [ ] {when:%Y-%m-%d %H:%M} (UTC) {text} "
                     f"<!-- reminder id=r{user:05x}{k:03x} due={_stamp(when)} -->")
        due[f"Reminder: {text}"] = when.timestamp()
    return "\n".join(lines) + "\n", due


async def _people(gw: Gateway, count: int, *, sink: bool) -> list[str]:
    state = gw.state
    uids = [f"u{n:06d}" for n in range(count)]
    zones = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney"]
    with state.tx():
        for n, uid in enumerate(uids):
            state.users.ensure(uid, display_name=f"Person {n}", timezone=zones[n % len(zones)])
            if sink:
                state.identities.add(SINK, f"a{n}", uid, source="bench")
    return uids


async def lateness(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from gateway.schedule import engine
    from gateway.schedule.engine import sync_user

    Sink.received = {}
    rng = random.Random(16)
    async with Gateway(_config(tmp / "late"), plugins=(SinkPlugin(),), entry_points=False, serve_http=False,
                       supervise=False) as gw:  # fmt: skip
        uids = await _people(gw, args.users, sink=True)
        start = datetime.now(UTC) + timedelta(seconds=args.lead)
        due: dict[str, float] = {}
        t0 = time.monotonic()
        for n, uid in enumerate(uids):
            text, d = _reminders(n, args.items, start, args.spread, rng)
            due.update(d)
            root = gw.memory_store(uid).root
            await asyncio.to_thread(lambda r=root, t=text: (r.mkdir(parents=True, exist_ok=True),
                                                            (r / "REMINDERS.md").write_text(t)))  # fmt: skip
        for uid in uids:
            await sync_user(gw, uid, ("REMINDERS.md",))
        armed_s = time.monotonic() - t0
        for _ in range(int((args.lead + args.spread + 120) * 2)):
            if len(Sink.received) >= len(due):
                break
            await asyncio.sleep(0.5)
        late = [Sink.received[t] - d for t, d in due.items() if t in Sink.received]
        out = {
            "users": args.users, "items": len(due), "delivered": len(late), "missing": len(due) - len(late),
            "arm_s": round(armed_s, 2), "armed_before_first_due": armed_s < args.lead,
            "lateness_p50_s": round(percentile(late, 0.5), 3),
            "lateness_p99_s": round(percentile(late, 0.99), 3),
            "lateness_max_s": round(max(late, default=0.0), 3), "outbox": gw.state.outbox.counts(),
            "file_writes": engine.recorder_of(gw).writes,
        }  # fmt: skip
        print(json.dumps({"lateness": out}), file=sys.stderr, flush=True)  # measured; the shutdown follows
    return out


async def lateness_outbox(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The same items and due times, armed as delayed bus jobs that call the outbox directly."""
    Sink.received = {}
    rng = random.Random(16)
    async with Gateway(_config(tmp / "outbox"), plugins=(SinkPlugin(),), entry_points=False, serve_http=False,
                       supervise=False) as gw:  # fmt: skip
        assert gw.bus is not None
        uids = await _people(gw, args.users, sink=True)
        start = datetime.now(UTC) + timedelta(seconds=args.lead)
        due: dict[str, float] = {}
        t0 = time.monotonic()
        for n, uid in enumerate(uids):
            _, d = _reminders(n, args.items, start, args.spread, rng)
            for k, (text, when) in enumerate(d.items()):
                due[text] = when
                await gw.bus.enqueue("bench_deliver", {"user_id": uid, "text": text, "id": f"b{n}-{k}"},
                                     job_id=f"b{n}-{k}", delay=max(0.0, when - time.time()))  # fmt: skip
        armed_s = time.monotonic() - t0
        for _ in range(int((args.lead + args.spread + 120) * 2)):
            if len(Sink.received) >= len(due):
                break
            await asyncio.sleep(0.5)
        late = [Sink.received[t] - d for t, d in due.items() if t in Sink.received]
    return {
        "items": len(due), "delivered": len(late), "missing": len(due) - len(late), "arm_s": round(armed_s, 2),
        "lateness_p50_s": round(percentile(late, 0.5), 3), "lateness_p99_s": round(percentile(late, 0.99), 3),
        "lateness_max_s": round(max(late, default=0.0), 3),
    }


async def at_rest(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from gateway.schedule.engine import sync_user

    async with Gateway(_config(tmp / "idle"), plugins=(SinkPlugin(),), entry_points=False, serve_http=False,
                       supervise=False) as gw:  # fmt: skip
        t0 = time.monotonic()
        uids = await _people(gw, args.idle_users, sink=False)
        later = datetime.now(UTC) + timedelta(days=1)
        rng = random.Random(7)
        for n in range(0, len(uids), 100):  # 1%: a reminder armed for tomorrow
            text, _ = _reminders(n, 1, later, 3600, rng)
            root = gw.memory_store(uids[n]).root
            root.mkdir(parents=True, exist_ok=True)
            (root / "REMINDERS.md").write_text(text)
            await sync_user(gw, uids[n], ("REMINDERS.md",))
        setup_s = time.monotonic() - t0
        first = await _measure(args.idle_seconds)  # the scheduler meets 100,000 new people
        steady = await _measure(args.idle_seconds)  # and the minute after
    return {"users": args.idle_users, "armed": (args.idle_users + 99) // 100, "setup_s": round(setup_s, 1),
            "first_window": first, "steady_window": steady}


async def _measure(seconds: float) -> dict[str, Any]:
    """CPU seconds per minute of this process, how late a 20 ms ticker on the loop wakes, and how much
    CPU the loop's thread spent between two ticks (``loop_busy``: the longest stretch of loop work,
    which unlike the wall-clock stall does not count the time a loaded machine did not run us)."""
    stalls: list[float] = []
    busy: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            before, cpu = loop.time(), time.thread_time()
            await asyncio.sleep(0.02)
            stalls.append(max(0.0, loop.time() - before - 0.02))
            busy.append(time.thread_time() - cpu)

    task = asyncio.create_task(ticker())
    cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, wall1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    stop.set()
    await task
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"seconds": round(wall1 - wall0, 1), "cpu_s_per_min": round(cpu / ((wall1 - wall0) / 60), 3),
            "loop_stall_max_ms": round(max(stalls, default=0.0) * 1000, 1),
            "loop_stall_p99_ms": round(percentile(stalls, 0.99) * 1000, 1),
            "loop_busy_max_ms": round(max(busy, default=0.0) * 1000, 1),
            "loop_busy_p99_ms": round(percentile(busy, 0.99) * 1000, 1)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"bench": "schedule", "machine": machine()}
    parts = {"lateness": lateness, "lateness_outbox_only": lateness_outbox, "at_rest": at_rest}
    chosen = {"all": tuple(parts), "lateness": ("lateness",), "outbox": ("lateness_outbox_only",),
              "rest": ("at_rest",)}[args.part]
    with tempfile.TemporaryDirectory(prefix="kith-bench-schedule-") as tmp:
        for name in chosen:
            out[name] = await parts[name](args, Path(tmp))
            if not args.json:
                print(json.dumps({name: out[name]}), flush=True)
    if "lateness" in out:
        late = out["lateness"]
        out["goal_p99_s"] = 1.0
        out["goal_met"] = late["lateness_p99_s"] <= 1.0 and late["missing"] == 0
    return out


def main(args: argparse.Namespace) -> int:
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack on stderr
    summary = asyncio.run(run(args))
    print(json.dumps(summary))
    return 0
