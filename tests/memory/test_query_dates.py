"""Time expressions in recall queries: relative and absolute forms, on the person's own calendar."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.memory.search.query_dates import TimeRange, time_ranges

# A Wednesday, mid-morning in UTC.
NOW = datetime(2023, 7, 12, 10, 0, tzinfo=UTC)


def local_days(query: str, now: datetime = NOW, tz: str = "UTC") -> list[tuple[date, date]]:
    """The ranges as local [first day, day after last), which is how the grammar thinks of them."""
    z = ZoneInfo(tz)
    out = []
    for r in time_ranges(query, now, tz):
        a = datetime.fromtimestamp(r.start, z)
        b = datetime.fromtimestamp(r.end, z)
        assert (a.hour, a.minute, b.hour, b.minute) == (0, 0, 0, 0), "ranges start and end at local midnight"
        out.append((a.date(), b.date()))
    return out


def d(y: int, m: int, day: int) -> date:
    return date(y, m, day)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did I say yesterday", [(d(2023, 7, 11), d(2023, 7, 12))]),
        ("anything from today?", [(d(2023, 7, 12), d(2023, 7, 13))]),
        ("the day before yesterday", [(d(2023, 7, 10), d(2023, 7, 11))]),
        ("3 days ago", [(d(2023, 7, 9), d(2023, 7, 10))]),
        ("two weeks ago", [(d(2023, 6, 24), d(2023, 7, 2))]),
        ("a couple of months ago", [(d(2023, 5, 1), d(2023, 6, 1))]),
        ("last week", [(d(2023, 7, 3), d(2023, 7, 10))]),
        ("this week", [(d(2023, 7, 10), d(2023, 7, 17))]),
        ("last weekend", [(d(2023, 7, 8), d(2023, 7, 10))]),
        ("last month", [(d(2023, 6, 1), d(2023, 7, 1))]),
        ("last year", [(d(2022, 1, 1), d(2023, 1, 1))]),
        ("last Tuesday", [(d(2023, 7, 11), d(2023, 7, 12))]),
        ("last Wednesday", [(d(2023, 7, 5), d(2023, 7, 6))]),  # today is Wednesday: a week back
        ("on Sunday", [(d(2023, 7, 9), d(2023, 7, 10))]),
        # Summer has begun but is not over: "last summer" is the previous one, "this summer" this one.
        ("our trip last summer", [(d(2022, 6, 1), d(2022, 9, 1))]),
        ("this summer", [(d(2023, 6, 1), d(2023, 9, 1))]),
        ("last winter", [(d(2022, 12, 1), d(2023, 3, 1))]),
        ("in spring", [(d(2023, 3, 1), d(2023, 6, 1))]),
        ("summer 2021", [(d(2021, 6, 1), d(2021, 9, 1))]),
        ("last fall", [(d(2022, 9, 1), d(2022, 12, 1))]),
    ],
)
def test_relative_forms(query: str, expected: list[tuple[date, date]]) -> None:
    assert local_days(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("on 2023-05-08", [(d(2023, 5, 8), d(2023, 5, 9))]),
        ("what happened on 8 May, 2023", [(d(2023, 5, 8), d(2023, 5, 9))]),
        ("the 8th of May", [(d(2023, 5, 8), d(2023, 5, 9))]),
        ("May 8th", [(d(2023, 5, 8), d(2023, 5, 9))]),
        ("Dec 24", [(d(2022, 12, 24), d(2022, 12, 25))]),  # no year: the latest one not in the future
        ("March 3, 2021", [(d(2021, 3, 3), d(2021, 3, 4))]),
        ("in May", [(d(2023, 5, 1), d(2023, 6, 1))]),
        ("in may", [(d(2023, 5, 1), d(2023, 6, 1))]),
        ("during September", [(d(2022, 9, 1), d(2022, 10, 1))]),  # not begun this year: last year's
        ("May 2023", [(d(2023, 5, 1), d(2023, 6, 1))]),
        ("in May 2023", [(d(2023, 5, 1), d(2023, 6, 1))]),  # one range, not two
        ("back in 2019", [(d(2019, 1, 1), d(2020, 1, 1))]),
        ("last July", [(d(2022, 7, 1), d(2022, 8, 1))]),
    ],
)
def test_absolute_forms(query: str, expected: list[tuple[date, date]]) -> None:
    assert local_days(query) == expected


@pytest.mark.parametrize(
    "query",
    ["this may help", "I may go", "did I fall", "we march on", "what does Melanie like", "recently", "", "in 1066 ad"],
)
def test_words_that_are_not_times_add_nothing(query: str) -> None:
    assert time_ranges(query, NOW) == []


def test_yesterday_is_the_persons_yesterday() -> None:
    # 23:30 UTC on 11 July is already 12 July in Tokyo and still 11 July in New York.
    now = datetime(2023, 7, 11, 23, 30, tzinfo=UTC)
    assert local_days("yesterday", now, "Asia/Tokyo") == [(d(2023, 7, 11), d(2023, 7, 12))]
    assert local_days("yesterday", now, "America/New_York") == [(d(2023, 7, 10), d(2023, 7, 11))]
    (tokyo,) = time_ranges("yesterday", now, "Asia/Tokyo")
    assert tokyo.start == datetime(2023, 7, 11, tzinfo=ZoneInfo("Asia/Tokyo")).timestamp()
    assert tokyo.end - tokyo.start == 86400
    # An instant given as epoch seconds, or a naive datetime (taken as UTC), means the same.
    assert time_ranges("yesterday", now.timestamp(), "Asia/Tokyo") == [tokyo]
    assert time_ranges("yesterday", now.replace(tzinfo=None), "Asia/Tokyo") == [tokyo]


def test_unknown_or_missing_zone_is_utc() -> None:
    assert time_ranges("yesterday", NOW, "Mars/Olympus") == time_ranges("yesterday", NOW, None)
    assert local_days("yesterday") == [(d(2023, 7, 11), d(2023, 7, 12))]


def test_a_range_across_a_dst_change_is_its_local_days() -> None:
    # Europe/Berlin left summer time on 29 October 2023: that week is 7 days and one hour long.
    now = datetime(2023, 11, 1, 12, tzinfo=UTC)
    assert local_days("last week", now, "Europe/Berlin") == [(d(2023, 10, 23), d(2023, 10, 30))]
    (r,) = time_ranges("last week", now, "Europe/Berlin")
    assert r.end - r.start == timedelta(days=7, hours=1).total_seconds()


def test_several_expressions_and_containment() -> None:
    ranges = time_ranges("yesterday or last weekend", NOW)
    assert len(ranges) == 2
    r = TimeRange(10.0, 20.0)
    assert 10.0 in r and 19.9 in r and 20.0 not in r


@pytest.mark.parametrize(
    "query",
    ["9999-12-31", "31 December 9999", "May 0000", "0001-01-01", "999 years ago", "999 months ago",
     "2023-02-30", "31 February", "on 45 May", "summer 1899", "next December", "in December"],
)
def test_odd_dates_never_raise(query: str) -> None:
    for now in (NOW, datetime(2023, 12, 31, 23, 59, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)):
        for r in time_ranges(query, now, "Pacific/Kiritimati"):
            assert r.start < r.end
