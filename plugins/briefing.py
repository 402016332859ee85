"""Briefings: a person's morning summary, assembled from their own files and facts, plus plugin sections.

``run_briefing(gateway, user_id)`` assembles the text from

* due tasks (``TASKS.json``: open tasks due today or overdue, in the person's timezone),
* today's reminders (``REMINDERS.md``: pending ones due before the end of their day),
* working memory (``WORKING.md``, when not expired),
* facts with upcoming dates (the knowledge graph: an ISO date in the next week; birthdays and
  anniversaries every year),
* sections from plugins (hook ``gateway_briefing_sections``: weather, a calendar),

records it as a conversation on the ``briefing`` channel (a session of the person's own scope: the
sleep cycle counts it in its "automated" share, ``sleep.automated_channels``) and returns it. It does
not send it: the schedule (a ``CRONS.json`` prompt of kind ``briefing``, ``gateway.schedule.engine``)
or ``deliver_briefing`` hands it to the outbox, which routes it and keeps it through quiet hours.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from gateway.delivery.outbox import deliver
from gateway.delivery.quiet import zone
from gateway.delivery.sections import BriefingSection
from gateway.memory.files import working
from gateway.state.records import TranscriptEntry

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore
    from gateway.services import Services

log = logging.getLogger("kith.plugins.briefing")

CHANNEL = "briefing"
PROMPT = "(scheduled) morning briefing"
UPCOMING_DAYS = 7
ANNUAL = ("birthday", "anniversary", "born")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MAX_SECTION_CHARS = 1500


def _read(store: MemoryStore, name: str) -> str:
    try:
        return store.read(name) if store.exists(name) else ""
    except Exception:  # an unreadable file leaves its section out; the briefing still goes
        log.warning("briefing: %s unreadable", name, exc_info=True)
        return ""


def _parse_day(value: object, tz: Any) -> date | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(tz).date() if when.tzinfo else when.date()


def due_tasks(raw: str, today: date, tz: Any) -> list[str]:
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return ["(TASKS.json does not parse; fix it by hand)"]
    tasks = data.get("tasks") if isinstance(data, dict) else data
    out = []
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict) or task.get("status") == "done":
            continue
        day = _parse_day(task.get("due"), tz)
        if day is not None and day <= today:
            late = " (overdue)" if day < today else ""
            out.append(f"- {task.get('text', '')}{late}")
    return out


def todays_reminders(raw: str, now: datetime, tz: Any) -> list[str]:
    from plugins.tools.reminders import parse_reminders

    end = datetime.combine(now.astimezone(tz).date() + timedelta(days=1), time(0), tzinfo=tz).astimezone(UTC)
    due = sorted((r for r in parse_reminders(raw) if r.status == "pending" and r.due < end), key=lambda r: r.due)
    return [f"- {r.due.astimezone(tz):%H:%M} {r.what}" for r in due]


def upcoming_dates(facts: list[Any], today: date) -> list[str]:
    out: list[tuple[date, str]] = []
    for fact in facts:
        m = _ISO_DATE.search(fact.object)
        if not m:
            continue
        try:
            day = date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            continue
        if any(word in fact.predicate.lower() for word in ANNUAL):
            try:
                day = day.replace(year=today.year)
                if day < today:
                    day = day.replace(year=today.year + 1)
            except ValueError:  # 29 February in a common year
                day = date(today.year, 3, 1)
        if today <= day <= today + timedelta(days=UPCOMING_DAYS):
            out.append((day, f"- {day:%a %d %b}: {fact.subject} {fact.predicate.replace('_', ' ')} {fact.object}"))
    return [line for _, line in sorted(out)]


def builtin_sections(gateway: Services, user_id: str, now: datetime) -> list[BriefingSection]:
    """The person's own sections (blocking: file reads; run in a thread)."""
    user = gateway.state.users.get(user_id)
    tz = zone(user.timezone if user else "UTC")
    today = now.astimezone(tz).date()
    store = gateway.memory_store(user_id)
    sections = []
    tasks = due_tasks(_read(store, "TASKS.json"), today, tz)
    if tasks:
        sections.append(BriefingSection(source="briefing", title="Tasks due", text="\n".join(tasks), order=10))
    reminders = todays_reminders(_read(store, "REMINDERS.md"), now, tz)
    if reminders:
        sections.append(BriefingSection(source="briefing", title="Today's reminders", text="\n".join(reminders),
                                        order=20))  # fmt: skip
    wm = working.read(store, now)
    if wm is not None:
        sections.append(BriefingSection(source="briefing", title="Where we left off", text=wm.body, order=30))
    dates = upcoming_dates(gateway.state.knowledge.current(now, user_id=user_id), today)
    if dates:
        sections.append(BriefingSection(source="briefing", title="Coming up", text="\n".join(dates), order=40))
    return sections


def render(sections: list[BriefingSection], now: datetime, tz: Any) -> str:
    head = f"Good morning. Your briefing for {now.astimezone(tz):%A, %d %B %Y}:"
    if not sections:
        return head + "\n\nNothing due today, no reminders, nothing coming up this week."
    parts = [head]
    for s in sorted(sections, key=lambda s: (s.order, s.title)):
        body = s.text.strip()
        if len(body) > _MAX_SECTION_CHARS:
            body = body[:_MAX_SECTION_CHARS].rstrip() + " ..."
        parts.append(f"**{s.title}**\n{body}")
    return "\n\n".join(parts)


def record(gateway: Services, user_id: str, text: str, now: datetime) -> str:
    """The briefing as a conversation on the ``briefing`` channel, in the person's own scope; its session id."""
    state = gateway.state
    session_id = uuid.uuid4().hex
    turn_id = uuid.uuid4().hex
    key = f"{CHANNEL}:{user_id}"
    entries = [TranscriptEntry(turn_id=turn_id, session_id=session_id, user_id=user_id, role=role, content=content,
                               channel=CHANNEL, conversation_key=key, speaker=speaker, created_at=now)
               for role, content, speaker in (("user", PROMPT, "scheduler"), ("assistant", text, ""))]  # fmt: skip
    with state.tx():
        state.sessions.create(session_id, user_id=user_id, scope_key=f"user:{user_id}", conversation_key=key,
                              persona=gateway.config.personas.default, at=now)  # fmt: skip
        state.turns.append(*entries)
        state.sessions.end(session_id, now)
    return session_id


async def run_briefing(gateway: Services, user_id: str, now: datetime | None = None) -> str:
    """Assemble the person's briefing, record it on the ``briefing`` channel, and return its text.

    The schedule runs it for a scheduled prompt of kind ``briefing`` (``CRONS.json``: "every weekday
    at 8 give me a briefing"; ``plugins/schedule.py`` registers it), at the schedule clock's ``now``."""
    now = now or datetime.now(UTC)
    user = gateway.state.users.get(user_id)
    tz = zone(user.timezone if user else "UTC")
    sections = await asyncio.to_thread(builtin_sections, gateway, user_id, now)
    sections += await gateway.hooks.briefing_sections(gateway, user_id, now)
    text = render(sections, now, tz)
    record(gateway, user_id, text, now)
    return text


async def deliver_briefing(gateway: Services, user_id: str, *, delivery_id: str) -> None:
    """Run the briefing and hand it to the outbox (idempotent by ``delivery_id``: a retried job that
    already recorded it does not assemble or record it again)."""
    if gateway.state.outbox.get(delivery_id) is not None:
        return
    text = await run_briefing(gateway, user_id)
    await deliver(gateway, user_id=user_id, text=text, kind="briefing", origin=None, delivery_id=delivery_id)
