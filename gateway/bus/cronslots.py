"""Cron slots in a user's local time, with DST handled explicitly.

A slot is identified by its local wall-clock time ("2024-11-03T01:30"), which is unique per day, so
it fires at most once even when DST repeats an hour. Its firing instant:

* ambiguous (fall back, the hour happens twice): the first occurrence;
* nonexistent (spring forward, the hour is skipped): shifted forward by the DST offset, so a daily
  02:30 job runs at 03:30 that day. A slot shifted past a later slot that has already fired is
  dropped (an hourly job simply runs once fewer on the short day), never run out of order.

croniter walks naive wall-clock times only; all timezone arithmetic is here, in zoneinfo.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

_LOOKAHEAD = timedelta(hours=3)  # more than any DST shift (1h almost everywhere, 2h at most)
SLOT_FORMAT = "%Y-%m-%dT%H:%M"


def fire_instant(slot: datetime, tz: ZoneInfo) -> datetime:
    """When a naive local slot fires, in UTC (fold=0: first occurrence / shifted past a gap)."""
    return slot.replace(tzinfo=tz, fold=0).astimezone(UTC)


def latest_due(expr: str, tz: ZoneInfo, now: datetime) -> datetime | None:
    """The latest naive local slot whose firing instant is <= now.

    Walks back from a little after local now, because a slot after local now can already be due
    (the second pass of a repeated hour) and one before it may not be (a slot shifted past a gap).
    """
    local = now.astimezone(tz).replace(tzinfo=None)
    it = croniter(expr, local + _LOOKAHEAD)
    for _ in range(1_000):  # a minutely job needs ~180 steps back; sparser ones a few
        slot = it.get_prev(datetime)
        if fire_instant(slot, tz) <= now:
            return slot
    return None


def slot_key(slot: datetime) -> str:
    return slot.strftime(SLOT_FORMAT)
