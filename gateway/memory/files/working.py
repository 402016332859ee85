"""WORKING.md: the rolling "where we left off" snapshot compaction writes and session start injects.

Format (one file per root, replaced on every compaction)::

    # Working memory
    Updated: 2026-02-25T11:30:00Z
    Expires: 2026-03-10T11:30:00Z

    <summary>

A file whose ``Expires`` is in the past, or that has no parseable header, is skipped silently (logged
at debug): a stale snapshot must never reappear as "what we were just doing".
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gateway.memory.files.store import MemoryStore

log = logging.getLogger("kith.memory.working")

FILE = "WORKING.md"
_HEADER = re.compile(r"^(Updated|Expires):\s*(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class WorkingMemory:
    body: str
    updated: datetime
    expires: datetime


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(body: str, *, now: datetime, ttl_days: float) -> str:
    """The file for ``body``, which the writer has already cut to its budget (``working_max_tokens``)."""
    body = body.strip()
    return (
        f"# Working memory\nUpdated: {_iso(now)}\nExpires: {_iso(now + timedelta(days=ttl_days))}\n\n{body}\n"
    )


def parse(text: str) -> WorkingMemory | None:
    fields = {m.group(1): m.group(2) for m in _HEADER.finditer(text[:500])}
    try:
        updated = datetime.fromisoformat(fields["Updated"].replace("Z", "+00:00"))
        expires = datetime.fromisoformat(fields["Expires"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    lines = text.splitlines()
    body_start = 0
    for i, line in enumerate(lines):
        if line.startswith("Expires:"):
            body_start = i + 1
            break
    return WorkingMemory(body="\n".join(lines[body_start:]).strip(), updated=updated, expires=expires)


def read(store: MemoryStore, now: datetime) -> WorkingMemory | None:
    """The working memory of a root, or None when absent, unreadable or expired."""
    if not store.exists(FILE):
        return None
    wm = parse(store.read(FILE))
    if wm is None:
        log.debug("%s in %s has no Updated/Expires header; skipped", FILE, store.root)
        return None
    if wm.expires <= now:
        log.debug("%s in %s expired at %s; skipped", FILE, store.root, wm.expires)
        return None
    return wm if wm.body else None


def write(store: MemoryStore, body: str, *, now: datetime, ttl_days: float, source: str) -> None:
    store.write(FILE, render(body, now=now, ttl_days=ttl_days), source=source)
