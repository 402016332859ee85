"""Retention cutoff: which dated files, derived chunks and ended facts are old enough to prune.

One rule for everything, decided in the user's timezone: with ``retention_days = N`` and a local date
of today ``D``, the oldest kept day is ``D - N``. A dated file is kept iff its date is on or after that
day; a timestamp is kept iff it is at or after local midnight starting that day. Files and chunks of the
same day therefore live and die together.

Timestamps are compared as parsed datetimes, never as strings, because stored forms differ
(``2024-03-02 23:00:00`` from SQLite, ``2024-03-02T23:00:00+00:00`` from ``isoformat``) and the ``'T'``
form sorts after the space form on the same day. When SQL must do the comparison, use
:func:`sqlite_cutoff` (for ``datetime('now')`` columns) or :func:`db_cutoff` (for kith's own columns).

``retention_days <= 0`` means "keep forever": every function then reports nothing as expired. The
profile (USER.md, its audit, PATTERNS.md, tiers) is never pruned by age; only paths under the given
dated directories are considered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from gateway.memory.knowledge.timestamps import TimeLike, parse_time, to_db, to_sqlite

DATED_DIRS: tuple[str, ...] = ("memories/",)
# memories/2024-03-02.md, or a slot suffix: sessions/2024-03-02-evening.md
_DATED = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})(?:-[A-Za-z0-9_-]+)?\.md$")


def _tz(tz: str | tzinfo) -> tzinfo:
    return ZoneInfo(tz) if isinstance(tz, str) else tz


def enabled(retention_days: int | None) -> bool:
    return retention_days is not None and retention_days > 0


def local_today(now: TimeLike, tz: str | tzinfo) -> date:
    return parse_time(now).astimezone(_tz(tz)).date()


def cutoff_date(now: TimeLike, retention_days: int, tz: str | tzinfo) -> date:
    """Oldest local date still kept."""
    return local_today(now, tz) - timedelta(days=retention_days)


def cutoff_instant(now: TimeLike, retention_days: int, tz: str | tzinfo) -> datetime:
    """Aware UTC instant of local midnight at the start of :func:`cutoff_date`; older is expired."""
    zone = _tz(tz)
    start = datetime.combine(cutoff_date(now, retention_days, zone), time.min, tzinfo=zone)
    return start.astimezone(UTC)


def sqlite_cutoff(now: TimeLike, retention_days: int, tz: str | tzinfo) -> str:
    """Cutoff as ``YYYY-MM-DD HH:MM:SS`` UTC: safe in ``WHERE created_at < ?`` against SQLite
    ``datetime('now')`` defaults. Never use ``isoformat()`` for this (see module docstring)."""
    return to_sqlite(cutoff_instant(now, retention_days, tz))


def db_cutoff(now: TimeLike, retention_days: int, tz: str | tzinfo) -> str:
    """Cutoff in kith's stored format (``gateway.memory.knowledge.timestamps.DB_FORMAT``)."""
    return to_db(cutoff_instant(now, retention_days, tz))


def is_expired(timestamp: TimeLike, cutoff: datetime) -> bool:
    """True iff ``timestamp`` (any accepted form; naive means UTC) is strictly before ``cutoff``.

    Unparseable timestamps are never expired: deleting data because its date is garbage is worse
    than keeping it one more night.
    """
    try:
        return parse_time(timestamp) < cutoff
    except ValueError:
        return False


def dated_file_date(rel: str) -> date | None:
    name = rel.rsplit("/", 1)[-1]
    m = _DATED.match(name)
    if m is None:
        return None
    try:
        return date.fromisoformat(m.group("date"))
    except ValueError:  # 2024-02-30
        return None


def expired_dated_files(
    rels: Iterable[str],
    *,
    now: TimeLike,
    retention_days: int | None,
    tz: str | tzinfo,
    dirs: tuple[str, ...] = DATED_DIRS,
) -> list[str]:
    """The subset of ``rels`` (store-relative paths) to delete: dated files in ``dirs`` older than
    the cutoff day. Undated or unparseable names are never selected."""
    if not enabled(retention_days):
        return []
    assert retention_days is not None
    oldest = cutoff_date(now, retention_days, tz)
    out = []
    for rel in rels:
        # Only direct children of a dated directory: memories/archive/2020-01-01.md is not ours.
        if not any(rel.startswith(d) and "/" not in rel[len(d) :] for d in dirs):
            continue
        day = dated_file_date(rel)
        if day is not None and day < oldest:
            out.append(rel)
    return out


def expired_items(
    items: Iterable[tuple[str, TimeLike]], *, now: TimeLike, retention_days: int | None, tz: str | tzinfo
) -> list[str]:
    """Ids of ``(id, timestamp)`` pairs (chunks, transcript rows) older than the cutoff instant."""
    if not enabled(retention_days):
        return []
    assert retention_days is not None
    cut = cutoff_instant(now, retention_days, tz)
    return [item_id for item_id, ts in items if is_expired(ts, cut)]
