"""Time expressions in a recall query, as ranges of instants: "yesterday", "last summer", "in May".

A question about *when* something was said usually names the time in the person's own terms, relative
to today and in their time zone: "what did I say yesterday" at 00:30 in Tokyo means a different day
than in UTC. ``time_ranges`` turns such expressions into half-open ``[start, end)`` ranges of epoch
seconds, computed on the person's local calendar and converted to instants, which recall uses to lift
memories dated inside them (``RecallSettings.date_weight``). Vague words ("recently", "lately")
name no range: recency decay is the signal for them. No model, no dependency: a small fixed
grammar of English forms, each tested; anything it does not recognise adds no range (and so changes
nothing). Seasons are those of the northern hemisphere (meteorological: summer = June-August).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MONTHS = {
    m: i + 1
    for i, names in enumerate((
        ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
        ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
        ("november", "nov"), ("december", "dec"),
    ))
    for m in names
}
WEEKDAYS = {d: i for i, d in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "a couple of": 2, "few": 3, "a few": 3, "several": 3,
}
_UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}

_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_NUM_RE = r"\d{1,3}|a few|a couple of|couple of|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|few"
_Y = r"(?:19|20)\d{2}"  # years this century and the last: no date arithmetic can overflow
_ISO = re.compile(rf"\b({_Y})-(\d{{2}})-(\d{{2}})\b")
# "8 May 2023", "8th of May", "May 8, 2023", "May 8th"
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?(?:,?\s+({_Y}))?\b", re.I)
_MONTH_DAY = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?!\d)(?:,?\s+({_Y}))?\b", re.I)
# "May 2023", "in May", "during March", "last April", "this June" (a bare "may"/"march" is a verb)
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+({_Y})\b", re.I)
_IN_MONTH = re.compile(rf"\b(in|during|since|over|early|late|mid|last|this|next|of)\s+({_MONTH_RE})\b", re.I)
_YEAR = re.compile(r"\b(in|during|since|of|back in)\s+((?:19|20)\d{2})\b", re.I)
_AGO = re.compile(rf"\b({_NUM_RE})\s+(day|week|month|year)s?\s+ago\b", re.I)
_RELATIVE = re.compile(r"\b(last|this|past|previous|next)\s+(week|weekend|month|year|night)\b", re.I)
_SEASON = re.compile(
    r"\b(?:(last|this|past|previous|in|during|over|the)\s+)?(spring|summer|autumn|fall|winter)"
    r"(?:\s+(?:of\s+)?((?:19|20)\d{2}))?\b",
    re.I,
)
_WEEKDAY = re.compile(r"\b(?:(last|this|on|past)\s+)(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I)
_DAY_WORD = re.compile(
    r"\b(today|tonight|this morning|this afternoon|this evening|yesterday|the day before yesterday)\b", re.I
)
_VERBS = {"may", "march", "mar"}  # lower-case month names that are English words


@dataclass(frozen=True, slots=True)
class TimeRange:
    """``[start, end)`` in epoch seconds."""

    start: float
    end: float

    def __contains__(self, ts: float) -> bool:
        return self.start <= ts < self.end


def zone(name: str | tzinfo | None) -> tzinfo:
    """The person's zone (an IANA name); UTC when unset or unknown, never an error in recall."""
    if name is None or isinstance(name, tzinfo):
        return name or UTC
    try:
        return ZoneInfo(name) if name else UTC
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def time_ranges(query: str, now: datetime | float, tz: str | tzinfo | None = None) -> list[TimeRange]:
    """Every time range ``query`` names, relative to ``now`` (an instant) on ``tz``'s calendar."""
    z = zone(tz)
    at = datetime.fromtimestamp(now, UTC) if isinstance(now, int | float) else now
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    today = at.astimezone(z).date()
    days: list[tuple[date, date]] = []  # local [first day, day after last)
    taken: list[tuple[int, int]] = []  # spans of the query already explained by a longer form

    def claim(m: re.Match[str]) -> bool:
        if any(a < m.end() and m.start() < b for a, b in taken):
            return False
        taken.append(m.span())
        return True

    for m in _ISO.finditer(query):
        if claim(m) and (d := _date(int(m[1]), int(m[2]), int(m[3]))):
            days.append((d, d + timedelta(days=1)))
    for m in _DAY_MONTH.finditer(query):
        if claim(m):
            days.extend(_day(m[3], MONTHS[m[2].lower()], int(m[1]), today))
    for m in _MONTH_DAY.finditer(query):
        if claim(m):
            days.extend(_day(m[3], MONTHS[m[1].lower()], int(m[2]), today))
    for m in _MONTH_YEAR.finditer(query):
        if claim(m):
            days.append(_month(int(m[2]), MONTHS[m[1].lower()]))
    for m in _IN_MONTH.finditer(query):
        if claim(m):
            month = MONTHS[m[2].lower()]
            word = m[1].lower()
            if m[2] in _VERBS and word not in ("in", "during", "since", "early", "late", "mid"):
                continue  # "this may help", "last march": verbs, unless the preposition says otherwise
            year = today.year if month <= today.month else today.year - 1  # the latest one begun
            if word == "last" and month >= today.month:
                year = today.year - 1
            elif word == "next":
                year = today.year if month > today.month else today.year + 1
            elif word == "this":
                year = today.year
            days.append(_month(year, month))
    for m in _YEAR.finditer(query):
        if claim(m):
            days.append((date(int(m[2]), 1, 1), date(int(m[2]) + 1, 1, 1)))
    for m in _AGO.finditer(query):
        if claim(m):
            n = int(m[1]) if m[1].isdigit() else _NUMBERS.get(m[1].lower(), 1)
            days.append(_ago(today, n, m[2].lower()))
    for m in _RELATIVE.finditer(query):
        if claim(m):
            days.append(_relative(today, m[1].lower(), m[2].lower()))
    for m in _SEASON.finditer(query):
        if m[2].lower() == "fall" and not m[1] and not m[3]:
            continue  # "did I fall": a verb
        if claim(m):
            days.append(_season(today, (m[1] or "").lower(), m[2].lower(), int(m[3]) if m[3] else None))
    for m in _WEEKDAY.finditer(query):
        if claim(m):
            back = (today.weekday() - WEEKDAYS[m[2].lower()]) % 7
            if m[1].lower() == "last" and back == 0:
                back = 7
            d = today - timedelta(days=back)
            days.append((d, d + timedelta(days=1)))
    for m in _DAY_WORD.finditer(query):
        if claim(m):
            word = m[1].lower()
            d = today - timedelta(days=2 if "before" in word else 1 if word == "yesterday" else 0)
            days.append((d, d + timedelta(days=1)))
    return [TimeRange(_instant(a, z), _instant(b, z)) for a, b in days if a < b]


def _instant(d: date, z: tzinfo) -> float:
    return datetime.combine(d, time(), z).timestamp()


def _date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def _day(year: str | None, month: int, day: int, today: date) -> list[tuple[date, date]]:
    d = _date(_year_or_recent(year, month, day, today), month, day)
    return [(d, d + timedelta(days=1))] if d else []


def _year_or_recent(year: str | None, month: int, day: int, today: date) -> int:
    """An explicit year, else the latest such date not after today (questions look back)."""
    if year:
        return int(year)
    return today.year if (month, day) <= (today.month, today.day) else today.year - 1


def _month(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year + month // 12, month % 12 + 1, 1)


def _add_months(d: date, n: int) -> date:
    k = d.year * 12 + d.month - 1 + n
    return date(k // 12, k % 12 + 1, 1)


def _ago(today: date, n: int, unit: str) -> tuple[date, date]:
    """"3 days ago" is that day; "2 weeks ago" that week give or take half a week; "2 months ago"
    that month; "4 years ago" that year (people round)."""
    if unit == "day":
        d = today - timedelta(days=n)
        return d, d + timedelta(days=1)
    if unit == "week":
        mid = today - timedelta(days=7 * n)
        return mid - timedelta(days=4), mid + timedelta(days=4)
    if unit == "month":
        first = _add_months(today.replace(day=1), -n)
        return first, _add_months(first, 1)
    return date(today.year - n, 1, 1), date(today.year - n + 1, 1, 1)


def _relative(today: date, word: str, unit: str) -> tuple[date, date]:
    step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1}[word]
    if unit == "night":  # "last night": yesterday evening, which may run into today
        return today - timedelta(days=1), today + timedelta(days=1)
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday()) + timedelta(days=7 * step)
        if unit == "weekend":
            sat = monday + timedelta(days=5)
            return sat, sat + timedelta(days=2)
        return monday, monday + timedelta(days=7)
    if unit == "month":
        first = _add_months(today.replace(day=1), step)
        return first, _add_months(first, 1)
    return date(today.year + step, 1, 1), date(today.year + step + 1, 1, 1)


def _season(today: date, word: str, name: str, year: int | None) -> tuple[date, date]:
    first = SEASONS[name]
    if year is not None:  # "summer 2022"; winter 2022 = December 2022 - February 2023
        start = date(year, first, 1)
        return start, _add_months(start, 3)
    # The latest such season already begun; "last" = the latest already over.
    start = date(today.year, first, 1)
    if start > today:
        start = date(today.year - 1, first, 1)
    if word in ("last", "past", "previous") and _add_months(start, 3) > today:
        start = date(start.year - 1, first, 1)
    return start, _add_months(start, 3)


__all__ = ["TimeRange", "time_ranges", "zone"]
