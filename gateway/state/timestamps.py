"""The one timestamp format kith stores: UTC ``YYYY-MM-DD HH:MM:SS.ffffff``.

Fixed width, so string order is time order (columns compare with ``<``), and comparable with
SQLite's ``datetime('now')`` prefix. Every backend stores instants this way or as a native
timestamp type; callers only ever see aware UTC datetimes.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

log = logging.getLogger("kith.state")

FORMAT = "%Y-%m-%d %H:%M:%S.%f"
_WIDTH = len("2026-01-01 00:00:00.000000")


def ts(dt: datetime | None = None) -> str:
    """``dt`` (default now) in the stored form."""
    dt = dt or datetime.now(UTC)
    return dt.astimezone(UTC).strftime(FORMAT)


def read_ts(value: object) -> datetime | None:
    """``parse_ts`` of a value read back from storage, or None when it is not a stored timestamp (a row
    damaged by hand or by an old import): readers that must not fail on one row (the person's message
    list, the session-log reconciliation) show or skip that row instead."""
    if not isinstance(value, str):
        return None
    try:
        return parse_ts(value)
    except ValueError:
        return None


_REPORTED: set[tuple[str, str]] = set()
_REPORT_AT_MOST = 10_000


def report_damaged(what: str, key: object, value: object) -> None:
    """Say (once per row and process) that a reader skipped ``what`` ``key``: its stored time is not a
    timestamp. A reader that answers a person, or serves a turn, never fails on one damaged row."""
    mark = (what, str(key))
    if mark in _REPORTED:
        return
    if len(_REPORTED) < _REPORT_AT_MOST:
        _REPORTED.add(mark)
    log.error("%s %s skipped: its stored time %r is not a timestamp (damaged by hand or by an old import); "
              "correct or delete the row", what, key, str(value)[:40])  # fmt: skip


def parse_ts(value: str) -> datetime:
    """A stored timestamp -> aware UTC datetime.

    ``fromisoformat`` reads the stored form about twenty times faster than ``strptime`` (a turn parses
    one per history row); anything not of exactly that shape takes the strict ``strptime`` path, which
    raises ``ValueError`` as it always did.
    """
    if len(value) == _WIDTH and value[10] == " " and value[19] == ".":
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if dt.tzinfo is None:
                return dt.replace(tzinfo=UTC)
    return datetime.strptime(value, FORMAT).replace(tzinfo=UTC)
