"""Slot arithmetic in local time: DST gaps and repeats, offsets that are not whole hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from gateway.bus.cronslots import fire_instant, latest_due, slot_key

NY = ZoneInfo("America/New_York")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def fires(expr: str, tz: ZoneInfo, start: datetime, hours: int) -> list[tuple[str, datetime]]:
    """Walk minute by minute; record each new latest-due slot the way the scheduler would."""
    out: list[tuple[str, datetime]] = []
    last = slot_key(latest_due(expr, tz, start) or start)
    t = start
    while t < start + timedelta(hours=hours):
        t += timedelta(minutes=1)
        slot = latest_due(expr, tz, t)
        if slot is not None and slot_key(slot) > last:
            last = slot_key(slot)
            out.append((last, t))
    return out


def test_fall_back_repeated_hour_fires_once_at_the_first_occurrence() -> None:
    # 2024-11-03: 01:00-02:00 EDT (05:00-06:00 UTC) then again as EST (06:00-07:00 UTC).
    got = fires("30 1 * * *", NY, utc(2024, 11, 3, 3, 0), hours=6)
    assert got == [("2024-11-03T01:30", utc(2024, 11, 3, 5, 30))]


def test_spring_forward_gap_fires_once_shifted_by_the_offset() -> None:
    # 2024-03-10: 02:00 EST jumps to 03:00 EDT (07:00 UTC); 02:30 does not exist that day.
    got = fires("30 2 * * *", NY, utc(2024, 3, 10, 4, 0), hours=6)
    assert got == [("2024-03-10T02:30", utc(2024, 3, 10, 7, 30))]  # 03:30 EDT


def test_hourly_across_both_transitions_never_duplicates() -> None:
    spring = fires("0 * * * *", NY, utc(2024, 3, 10, 4, 0), hours=6)
    # 02:00 does not exist; shifted it would share 03:00's instant, so the short day has one run less.
    assert [k[-5:] for k, _ in spring] == ["00:00", "01:00", "03:00", "04:00", "05:00", "06:00"]
    assert spring[2][1] == utc(2024, 3, 10, 7, 0)
    fall = fires("0 * * * *", NY, utc(2024, 11, 3, 3, 0), hours=6)
    keys = [k for k, _ in fall]
    assert keys == sorted(set(keys))  # 01:00 once, though the wall clock reads 01:00 twice
    assert len(fall) == 5  # six real hours, one local hour repeated


def test_half_hour_offsets_and_southern_dst() -> None:
    kolkata = ZoneInfo("Asia/Kolkata")  # UTC+05:30, no DST
    assert fire_instant(datetime(2024, 6, 1, 9, 0), kolkata) == utc(2024, 6, 1, 3, 30)
    sydney = ZoneInfo("Australia/Sydney")  # DST ends first Sunday of April: 03:00 -> 02:00
    got = fires("30 2 * * *", sydney, utc(2024, 4, 6, 13, 0), hours=5)
    assert got == [("2024-04-07T02:30", utc(2024, 4, 6, 15, 30))]  # first of the two 02:30s (AEDT)


def test_latest_due_before_and_after() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    assert slot_key(latest_due("0 9 * * *", berlin, utc(2024, 1, 15, 7, 59)) or datetime.min) == "2024-01-14T09:00"
    assert slot_key(latest_due("0 9 * * *", berlin, utc(2024, 1, 15, 8, 0)) or datetime.min) == "2024-01-15T09:00"
    assert slot_key(latest_due("0 9 * * *", berlin, utc(2024, 7, 15, 7, 0)) or datetime.min) == "2024-07-15T09:00"
