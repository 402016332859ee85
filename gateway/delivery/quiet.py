"""Quiet hours: a person's window (their local "HH:MM"-"HH:MM", in their timezone) in which proactive
messages are held, and when it ends."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from gateway.services import Services

_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


def parse_hhmm(value: str) -> time | None:
    m = _HHMM.match(value)
    return time(int(m[1]), int(m[2])) if m else None


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except Exception:  # an unknown name on an old record: UTC, like the scheduler does
        return ZoneInfo("UTC")


def window_end(start: time, end: time, tz: ZoneInfo, now: datetime) -> datetime | None:
    """When the quiet window that contains ``now`` ends (UTC), or None when ``now`` is outside it.

    A window may wrap past midnight (22:00-07:00). Local times are taken on the local date, so a
    window keeps its wall-clock hours across DST changes."""
    if start == end:
        return None
    local = now.astimezone(tz)
    t = local.time()
    if start < end:
        inside = start <= t < end
        end_date = local.date()
    else:
        inside = t >= start or t < end
        end_date = local.date() + timedelta(days=1) if t >= start else local.date()
    if not inside:
        return None
    return datetime.combine(end_date, end, tzinfo=tz).astimezone(UTC)


def quiet_until(gateway: Services, user_id: str, now: datetime) -> datetime | None:
    prefs = gateway.state.outbox.prefs(user_id)
    start, end = parse_hhmm(prefs.quiet_start), parse_hhmm(prefs.quiet_end)
    if start is None or end is None:
        return None
    user = gateway.state.users.get(user_id)
    return window_end(start, end, zone(user.timezone if user else "UTC"), now)
