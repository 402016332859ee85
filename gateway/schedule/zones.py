"""Time zones of people: IANA names only, and one rule for wall-clock times DST skips or repeats.

A local time that does not exist (spring forward: 02:30 in Berlin on the last Sunday of March) means
the same moment shifted forward by the gap (03:30 local); a local time that happens twice (fall back)
means its first occurrence. This is the cron scheduler's rule (``gateway.bus.cronslots``), so a
reminder, a scheduled prompt and a built-in cron job agree on what "02:30" is that day.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo

from gateway.bus.cronslots import fire_instant


@cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def valid_zone(name: str) -> bool:
    """Whether ``name`` is an IANA zone of this system's database (``Europe/Berlin``, ``UTC``)."""
    return name in _zones()


def zone(name: str, default: str = "UTC") -> ZoneInfo:
    """The zone ``name``, or ``default`` when it is empty or unknown (an old record, a hand edit)."""
    for candidate in (name, default, "UTC"):
        if candidate and valid_zone(candidate):
            return ZoneInfo(candidate)
    return ZoneInfo("UTC")


def suggest(name: str) -> list[str]:
    """A few zones whose name contains what the person typed (``berlin`` -> ``Europe/Berlin``)."""
    needle = name.strip().lower().replace(" ", "_")
    if len(needle) < 3:
        return []
    return sorted(z for z in _zones() if needle in z.lower())[:5]


def to_instant(local: datetime, tz: ZoneInfo) -> datetime:
    """A naive local wall-clock time in ``tz`` as a UTC instant (gap: shifted forward; fold: first)."""
    return fire_instant(local.replace(tzinfo=None), tz)


def to_local(instant: datetime, tz: ZoneInfo) -> datetime:
    """A UTC instant as a naive local wall-clock time in ``tz``."""
    return instant.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
