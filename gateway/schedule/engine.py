"""Arming and firing: one delayed bus job per scheduled item, never a scan of every user.

``sync_user`` reads a person's three files (after a tool write, a hand edit, a ``/tz`` change or at
start-up), gives hand-added lines their ids, reports new problems once, and arms each active item's
next due time as a delayed job whose id names the item and the instant (``sched:<user>:<kind>:<id>:<epoch>``),
so arming the same occurrence twice is a no-op on the bus. ``fire`` runs that job: it re-reads the file
(the file is the truth: a cancelled, edited or already-fired item is skipped), delivers, records the
occurrence in the file (``last=`` / ``sent=`` / ``last_run`` / ``alerted``) and arms the next one.
The cost of a minute is the items due in it: 100,000 idle users cost nothing.

Time comes from ``Schedule.clock`` (``gateway.bus.clock``): tests move a ``ManualClock`` across DST.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gateway.bus.clock import Clock, SystemClock
from gateway.memory.files.errors import MemoryFileNotFoundError
from gateway.memory.files.session_log import SILENT_SUFFIX
from gateway.schedule import deliver as delivery
from gateway.schedule.items import (
    CRONS,
    FILES,
    PARSERS,
    REMINDERS,
    TASKS,
    Item,
    Parsed,
    Problem,
    stamp,
)
from gateway.schedule.record import Mark, Recorder
from gateway.schedule.rules import latest_due
from gateway.schedule.zones import zone
from gateway.types import ConversationAddress, ConversationKind, InboundMessage, StashKey

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.schedule")
JOB = "schedule_due"
SCHEDULED_CHANNEL = "scheduled"  # the conversation a scheduled prompt runs on
_KIND_FILE = {"reminder": REMINDERS, "prompt": CRONS, "task": TASKS}
_LATE_GRACE = timedelta(seconds=1)
ARM_CONCURRENCY = 8  # a person's items armed at once (each one bus round trip)


class Timer(Protocol):
    async def arm(self, user_id: str, item: Item, due: datetime) -> None: ...


class BusTimer:
    """A delayed job per occurrence on the gateway's bus (durable across restarts)."""

    def __init__(self, gateway: Services, clock: Clock) -> None:
        self.gateway, self.clock = gateway, clock

    async def arm(self, user_id: str, item: Item, due: datetime) -> None:
        bus = self.gateway.bus
        if bus is None:
            return
        payload = {"user_id": user_id, "kind": item.kind, "item_id": item.id, "due": stamp(due)}
        delay = max(0.0, (due - self.clock.now()).total_seconds())
        await bus.enqueue(JOB, payload, job_id=f"sched:{user_id}:{item.kind}:{item.id}:{int(due.timestamp())}",
                          delay=delay)


Sender = Callable[..., Awaitable[None]]
#: A scheduled prompt kind's runner (``Schedule.runners``): the text to deliver, e.g. the briefing.
Runner = Callable[["Services", str, datetime], Awaitable[str]]


@dataclass
class Schedule:
    """Per gateway: the clock, how occurrences are armed, how they are delivered."""

    clock: Clock = field(default_factory=SystemClock)
    timer: Timer | None = None
    send: Sender = delivery.deliver
    own: dict[tuple[str, str], str] = field(default_factory=dict)  # (user, file) -> text this process wrote
    zones: dict[str, str] = field(default_factory=dict)  # user -> the zone their items were last armed in
    fired: int = 0  # deliveries made (tests, bench)
    recorder: Recorder | None = None  # fired occurrences on their way into the files
    runners: dict[str, Runner] = field(default_factory=dict)  # prompt kind -> runner (plugins register)


SCHEDULE: StashKey[Schedule] = StashKey()


def schedule_of(gateway: Services) -> Schedule:
    sched = gateway.stash.get(SCHEDULE)
    if sched is None:
        sched = Schedule()
        gateway.stash[SCHEDULE] = sched
    if sched.timer is None:
        sched.timer = BusTimer(gateway, sched.clock)
    if sched.recorder is None:
        sched.recorder = Recorder(gateway, sched.own)
    return sched


def recorder_of(gateway: Services) -> Recorder:
    rec = schedule_of(gateway).recorder
    assert rec is not None
    return rec


async def flush(gateway: Services) -> None:
    """Until every fired occurrence is recorded in its file (tests, shutdown)."""
    await recorder_of(gateway).flush()


def user_zone(gateway: Services, user_id: str) -> str:
    user = gateway.state.users.get(user_id)
    name = user.timezone if user and user.timezone else gateway.config.timezone
    return zone(name, gateway.config.timezone).key


def _read(gateway: Services, user_id: str, rel: str) -> str:
    store = gateway.memory_store(user_id)
    try:
        return store.read(rel) if store.exists(rel) else ""
    except MemoryFileNotFoundError:
        return ""


def _write(gateway: Services, user_id: str, rel: str, text: str, source: str) -> None:
    schedule_of(gateway).own[(user_id, rel)] = text
    gateway.memory_store(user_id).write(rel, text, source=source, message_id="")


def read_file(gateway: Services, user_id: str, rel: str, now: datetime | None = None) -> Parsed:
    now = now or schedule_of(gateway).clock.now()
    return PARSERS[rel](_read(gateway, user_id, rel), user_zone(gateway, user_id), now)


def items_of(gateway: Services, user_id: str) -> tuple[list[Item], list[Problem]]:
    items: list[Item] = []
    problems: list[Problem] = []
    for rel in FILES:
        parsed = read_file(gateway, user_id, rel)
        items += parsed.items
        problems += parsed.problems
    return items, problems


async def sync_user(gateway: Services, user_id: str, files: tuple[str, ...] = FILES) -> list[Problem]:
    """Re-read ``files`` of the person, arm what is due next, report new problems; returns all problems."""
    sched = schedule_of(gateway)
    now = sched.clock.now()
    tz = zone(user_zone(gateway, user_id))
    sched.zones[user_id] = tz.key
    problems: list[Problem] = []
    arms: list[tuple[Item, datetime]] = []
    # Reading, parsing and (for hand-added lines) writing the files in a worker thread: a big file or a
    # write's disk syncs never hold the event loop (the start-up sweep runs this for every person).
    for parsed in await asyncio.to_thread(_load, gateway, user_id, files, tz.key, now):
        problems += parsed.problems
        arms += [(item, due) for item in parsed.items if (due := item.next_due(tz, now)) is not None]
    if sched.timer is not None:
        timer = sched.timer
        # A few arms at once: one round trip each, overlapped, without opening a connection per item.
        for start in range(0, len(arms), ARM_CONCURRENCY):
            await asyncio.gather(*(timer.arm(user_id, item, due) for item, due in arms[start:start + ARM_CONCURRENCY]))
    await report_problems(gateway, user_id, problems, files)
    return problems


def _load(gateway: Services, user_id: str, files: tuple[str, ...], tz_name: str, now: datetime) -> list[Parsed]:
    """Blocking: parse each file; a hand-added line gets its id written into the file."""
    out = []
    for rel in files:
        raw = _read(gateway, user_id, rel)
        parsed = PARSERS[rel](raw, tz_name, now)
        if parsed.text != raw:
            _write(gateway, user_id, rel, parsed.text, "schedule:sync")
        out.append(parsed)
    return out


# ------------------------------------------------------------------------------------------ problems

def _reported_path(gateway: Services, user_id: str) -> Path:
    return Path(gateway.data_dir) / "users" / user_id / ".schedule" / "reported.json"


def _load_reported(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text("utf-8"))
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


async def report_problems(gateway: Services, user_id: str, problems: list[Problem],
                          files: tuple[str, ...] = FILES) -> list[Problem]:
    """Tell the person about each problem once (per distinct problem); returns those told now.

    A problem that is fixed is forgotten, so the same mistake made again later is reported again.
    """
    path = _reported_path(gateway, user_id)
    reported = _load_reported(path)
    current = {p.key: p.file for p in problems}
    kept = {k: f for k, f in reported.items() if f not in files or k in current}
    new = [p for p in problems if p.key not in reported]
    if new:
        lines = "\n".join(f"- {p.describe()}" for p in new)
        text = ("I could not schedule something in your files; I left it as it is, please fix it:\n" + lines)
        try:
            await schedule_of(gateway).send(gateway, user_id=user_id, text=text, kind="schedule_problem",
                                            origin=None, delivery_id=f"problem:{user_id}:{new[0].key}", notice=True)
        except Exception:
            log.warning("could not tell %s about %d schedule problem(s): %s", user_id, len(new), lines)
            return []
        kept.update({p.key: p.file for p in new})
    if kept != reported:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(kept), "utf-8")
        os.replace(tmp, path)
    return new


# -------------------------------------------------------------------------------------------- firing

async def fire(gateway: Services, payload: dict[str, Any]) -> bool:
    """The ``schedule_due`` job: deliver the item if it is still due now. True when delivered."""
    sched = schedule_of(gateway)
    uid, kind, item_id = str(payload["user_id"]), str(payload["kind"]), str(payload["item_id"])
    rel = _KIND_FILE.get(kind)
    if rel is None:
        log.warning("schedule job for unknown kind %r", kind)
        return False
    now = sched.clock.now()
    tz = zone(user_zone(gateway, uid))
    parsed = read_file(gateway, uid, rel, now)
    item = next((i for i in parsed.items if i.id == item_id), None)
    recorder = recorder_of(gateway)
    if item is not None:
        item = _with_mark(item, recorder.recorded(uid, rel, item_id))
    if item is None or not item.active:
        log.info("%s %s of %s is %s; not delivered", kind, item_id, uid, item.status if item else "gone")
        return False
    item_tz = zone(item.zone, tz.key) if item.zone else tz
    if item.rule is None:
        occurrence = item.due
    else:
        occurrence = latest_due(item.rule, item_tz, item.last or item.since or now, now + _LATE_GRACE)
    if occurrence is None or occurrence > now + _LATE_GRACE:
        nxt = item.next_due(tz, now)
        if nxt is not None and sched.timer is not None:
            await sched.timer.arm(uid, item, nxt)  # edited to later, or the zone moved: wait for it
        return False
    delivery_id = f"{kind}:{uid}:{item_id}:{stamp(occurrence)}"
    await _deliver(gateway, sched, uid, item, delivery_id)
    sched.fired += 1
    # The outbox row makes this occurrence fire once; the file learns it in a batch, off the loop.
    recorder.add(uid, rel, Mark(item.id, occurrence, now, one_shot=item.rule is None))
    if item.rule is not None and sched.timer is not None:
        done = replace(item, last=occurrence)
        nxt = done.next_due(tz, now)
        if nxt is not None:
            await sched.timer.arm(uid, done, nxt)
    return True


def _with_mark(item: Item, mark: Mark | None) -> Item:
    """The item as the file will say once ``mark`` is written."""
    if mark is None:
        return item
    if item.kind == "prompt" or (item.kind == "reminder" and item.rule is not None):
        return replace(item, last=max(item.last, mark.occurrence) if item.last else mark.occurrence)
    return replace(item, status="sent", last=mark.at)


async def _deliver(gateway: Services, sched: Schedule, uid: str, item: Item, delivery_id: str) -> None:
    kind: str = item.kind
    if item.kind == "reminder":
        text = f"Reminder: {item.text}"
    elif item.kind == "task":
        text = f"Task due: {item.text} (due {item.when})"
    elif gateway.state.outbox.get(delivery_id) is not None:
        return  # a retried job: this occurrence's turn ran and its answer is in the outbox already
    elif item.action:
        runner = sched.runners.get(item.action)
        if runner is None:
            raise LookupError(f"no runner for scheduled {item.action!r} (is its plugin loaded?)")
        kind, text = item.action, await runner(gateway, uid, sched.clock.now())
    else:
        text = await run_prompt(gateway, uid, item)
    await sched.send(gateway, user_id=uid, text=text, kind=kind, origin=address_of(gateway, uid, item.origin),
                     delivery_id=delivery_id)


def address_of(gateway: Services, user_id: str, key: str) -> ConversationAddress | None:
    """``websocket:phone`` (a conversation key) as an address; None when there is none."""
    channel, _, conversation_id = key.partition(":")
    if not channel or not conversation_id:
        return None
    return ConversationAddress(channel=channel, conversation_id=conversation_id, kind=ConversationKind.DM,
                               user_id=user_id, persona=gateway.config.personas.default)


async def run_prompt(gateway: Services, user_id: str, item: Item) -> str:
    """Run a scheduled prompt as a turn of the person on their ``scheduled`` conversation; the answer."""
    if gateway.identities.lookup(SCHEDULED_CHANNEL, user_id) is None:
        gateway.state.identities.add(SCHEDULED_CHANNEL, user_id, user_id, source="schedule")
    # A silent prompt's conversation is one the session log skips (no recall value, seed 004).
    conversation_id = f"{user_id}:{item.id}" + (SILENT_SUFFIX if item.silent else "")
    message = InboundMessage(channel=SCHEDULED_CHANNEL, account_id=user_id, conversation_id=conversation_id,
                             kind=ConversationKind.DM, text=item.text, display_name="scheduled", trusted=True,
                             timestamp=schedule_of(gateway).clock.now())
    reply = await gateway.handle_inbound(message)
    return reply.text if reply is not None and reply.text else f"(scheduled: {item.text}) no answer"


async def sweep(gateway: Services, *, pause: float = 0.0) -> int:
    """At start-up: arm every person's items (hand edits made while the daemon was down). Reads
    only the trees that have one of the files, a user at a time, yielding to the loop between."""
    users_dir = Path(gateway.data_dir) / "users"
    names = await asyncio.to_thread(_users_with_files, users_dir)
    for uid in names:
        try:
            await sync_user(gateway, uid)
        except Exception:
            log.exception("schedule: could not read the schedule of %s", uid)
        await asyncio.sleep(pause)
    return len(names)


def _users_with_files(users_dir: Path) -> list[str]:
    try:
        entries = sorted(os.scandir(users_dir), key=lambda e: e.name)
    except OSError:
        return []
    return [e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
            and any(os.path.exists(os.path.join(e.path, f)) for f in FILES)]
