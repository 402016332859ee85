"""What a person has scheduled, for the operator (``kith schedule``) and the console API: every item of
the three files with its next due time, the files' problems, and cancelling one item by id.

Cancelling writes the file (the truth): a reminder's line is marked ``[-]``, a scheduled prompt gets
``"enabled": false``, a task's alert ``"alert": false``; a job already armed finds it inactive and
delivers nothing. Works on a ``MemoryStore`` so the CLI needs no running daemon.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.memory.files.errors import MemoryFileNotFoundError
from gateway.memory.files.store import MemoryStore
from gateway.schedule.items import CRONS, FILES, PARSERS, REMINDERS, TASKS, Item, Problem, set_reminder, stamp
from gateway.schedule.zones import zone


@dataclass(frozen=True, slots=True)
class ItemView:
    id: str
    kind: str  # reminder | prompt | task
    text: str
    when: str  # as the person reads it ("every weekday at 08:00", "2026-05-10 09:00")
    rule: str  # rrule:... / cron:... ("" for one-shot)
    status: str
    next_due: str  # UTC instant, "" when it will not fire again
    last: str
    file: str

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _read(store: MemoryStore, rel: str) -> str:
    try:
        return store.read(rel) if store.exists(rel) else ""
    except MemoryFileNotFoundError:
        return ""


def view(item: Item, rel: str, tz_name: str, now: datetime) -> ItemView:
    nxt = item.next_due(zone(tz_name), now)
    return ItemView(id=item.id, kind=item.kind, text=item.text, when=item.when,
                    rule=item.rule.text if item.rule else "", status=item.status,
                    next_due=stamp(nxt) if nxt else "", last=stamp(item.last) if item.last else "", file=rel)


def schedule_of_user(store: MemoryStore, tz_name: str, now: datetime) -> tuple[list[ItemView], list[Problem]]:
    items: list[ItemView] = []
    problems: list[Problem] = []
    for rel in FILES:
        parsed = PARSERS[rel](_read(store, rel), tz_name, now)
        items += [view(i, rel, tz_name, now) for i in parsed.items]
        problems += parsed.problems
    items.sort(key=lambda v: (v.next_due == "", v.next_due, v.id))
    return items, problems


def cancel(store: MemoryStore, item_id: str, tz_name: str, now: datetime, *, source: str) -> ItemView | None:
    """Cancel the active item ``item_id``; its view before cancelling, or None when there is none."""
    for rel in FILES:
        raw = _read(store, rel)
        parsed = PARSERS[rel](raw, tz_name, now)
        item = next((i for i in parsed.items if i.id == item_id and i.active), None)
        if item is None:
            continue
        before = view(item, rel, tz_name, now)
        if rel == REMINDERS:
            new, _ = set_reminder(parsed.text, item_id, status="cancelled")
        else:
            data = json.loads(parsed.text if rel == CRONS else raw)
            entries = data.get("crons" if rel == CRONS else "tasks") if isinstance(data, dict) else data
            for entry in entries:
                if isinstance(entry, dict) and str(entry.get("id")) == item_id:
                    entry["enabled" if rel == CRONS else "alert"] = False
            new = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
        store.write(rel, new, source=source)
        return before
    return None


__all__ = ["TASKS", "ItemView", "cancel", "schedule_of_user", "view"]
