"""The one timestamp format the knowledge graph stores, and a tolerant parser for everything else.

Stored form: UTC ``YYYY-MM-DD HH:MM:SS.ffffff`` (the same as ``gateway.state.ts``). It is fixed-width,
so string order is time order and SQL can compare columns with ``<``. The trap this module exists to
avoid: ``datetime.isoformat()`` writes a ``T`` between date and time, and ``'T'`` sorts after ``' '``,
so an isoformat cutoff compared against space-separated rows of the same day is "greater" than every
one of them, whatever their time. Every value entering SQL goes through :func:`to_db`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo

DB_FORMAT = "%Y-%m-%d %H:%M:%S.%f"
SQLITE_FORMAT = "%Y-%m-%d %H:%M:%S"  # what SQLite's datetime('now') produces

TimeLike = datetime | date | str | int | float

_NUMERIC = re.compile(r"^-?\d+(\.\d+)?$")


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_time(value: TimeLike, *, tz: tzinfo = UTC) -> datetime:
    """Any accepted timestamp -> aware UTC datetime.

    Accepts aware/naive datetimes, dates (midnight in ``tz``), epoch seconds, and strings in ISO form
    with ``T`` or a space, an optional ``Z``/offset, or a bare date. Naive values are read in ``tz``.
    Raises ``ValueError`` for anything else, so bad input is loud at the boundary, never stored.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime.combine(value, time.min)
    elif isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    elif isinstance(value, str):
        text = value.strip()
        if _NUMERIC.match(text):
            return datetime.fromtimestamp(float(text), UTC)
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)  # 3.11 accepts both 'T' and ' ' separators
        except ValueError:
            raise ValueError(f"not a timestamp: {value!r}") from None
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    return dt.astimezone(UTC)


def to_db(value: TimeLike, *, tz: tzinfo = UTC) -> str:
    """Canonical stored form of ``value`` (see module docstring)."""
    return parse_time(value, tz=tz).strftime(DB_FORMAT)


def from_db(text: str) -> datetime:
    return datetime.strptime(text, DB_FORMAT).replace(tzinfo=UTC)


def to_sqlite(value: TimeLike, *, tz: tzinfo = UTC) -> str:
    """Seconds-precision UTC form matching SQLite ``datetime('now')`` column defaults."""
    return parse_time(value, tz=tz).strftime(SQLITE_FORMAT)


def add_days(value: TimeLike, days: float) -> str:
    return to_db(parse_time(value) + timedelta(days=days))
