"""Dated memories in the read path (seed 004): the last N days of ``memories/YYYY-MM-DD.md``.

The nightly cycle writes one file per day of what it learnt (``background/sleep.py``). Recall finds
such a file only when a message shares its words, yet "what happened this week" is exactly what a
conversation picks up on. So the session-start injection loads the files of the last
``memory.dated_days`` days (the person's calendar, today included) whole, newest first: when the
section is over its budget the budgeter cuts from the end, and the oldest day goes first.
The recall stage drops hits from the same files (they are in the prompt already): the files this
session's snapshot holds (``record_injected``), or, before the snapshot exists (the session's first
turn, where it is being taken from the same window), the window's files.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from datetime import date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from gateway.memory.files.errors import MemoryStoreError
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.memory.files.store import MemoryStore

DIR = "memories"
_MAX_SESSIONS = 4096
# session id -> the dated files its session-start snapshot holds (per gateway: ``gateway.stash``)
INJECTED: StashKey[OrderedDict[str, frozenset[str]]] = StashKey()
_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
_PATH = re.compile(r"^memories/(\d{4}-\d{2}-\d{2})\.md$")


def local_day(now: datetime, tz: tzinfo) -> date:
    return now.astimezone(tz).date()


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def in_window(rel: str, today: date, days: int) -> bool:
    """Whether ``rel`` is a dated memory file of the last ``days`` days up to ``today``."""
    match = _PATH.match(rel)
    day = _day(match.group(1)) if match else None
    return day is not None and days > 0 and today - timedelta(days=days - 1) <= day <= today


def recent(store: MemoryStore, today: date, days: int) -> list[tuple[date, str]]:
    """``(day, text)`` of the dated files in the window, newest first (empty files skipped)."""
    if days <= 0:
        return []
    try:
        entries = store.list(DIR) if store.exists(DIR) else []
    except MemoryStoreError:
        return []
    out = []
    for entry in entries:
        match = _NAME.match(entry.path.rsplit("/", 1)[-1])
        if entry.is_dir or match is None or not in_window(f"{DIR}/{match.group(1)}.md", today, days):
            continue
        try:
            text = store.read(entry.path).strip()
        except MemoryStoreError:
            continue
        if text:
            out.append((date.fromisoformat(match.group(1)), text))
    out.sort(key=lambda item: item[0], reverse=True)
    return out


def _body(text: str) -> str:
    """The file without its ``# heading``: the section gives each day its own date heading."""
    head, sep, rest = text.partition("\n")
    return rest.strip() if sep and head.startswith("# ") else text


def section_text(files: list[tuple[date, str]]) -> str:
    return "\n\n".join(f"## {day:%A %d %B %Y}\n{_body(text)}" for day, text in files)


def recent_text(store: MemoryStore, today: date, *, days: int = 3, max_chars: int = 8000) -> str:
    """The dated memories of the last ``days`` days as one text of at most ``max_chars``, newest first:
    what the nightly curation reads besides tonight's (seed 004: the last 3 days, about 8,000
    characters). Over the cap the oldest days go first, then the oldest lines of the newest."""
    out: list[str] = []
    used = 0
    for day, text in recent(store, today, days):
        block = f"## {day:%A %d %B %Y}\n{_body(text)}"
        if used + len(block) > max_chars:
            room = max_chars - used
            if room > 200:  # a day cut to a few words says nothing; keep its heading and first lines
                out.append(block[:room].rsplit("\n", 1)[0])
            break
        out.append(block)
        used += len(block) + 2
    return "\n\n".join(out)


def path_of(day: date) -> str:
    return f"{DIR}/{day.isoformat()}.md"


def record_injected(stash: Any, session_id: str, files: list[tuple[date, str]]) -> None:
    """Note which dated files the snapshot of ``session_id`` loaded (``stash``: ``gateway.stash``)."""
    seen = stash.setdefault(INJECTED, OrderedDict())
    seen[session_id] = frozenset(path_of(day) for day, _ in files)
    seen.move_to_end(session_id)
    while len(seen) > _MAX_SESSIONS:
        seen.popitem(last=False)


def injected(stash: Any, session_id: str) -> frozenset[str] | None:
    """The dated files the snapshot of ``session_id`` loaded; None before it was taken."""
    seen = stash.get(INJECTED)
    return None if seen is None else seen.get(session_id)
