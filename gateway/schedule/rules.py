"""Recurrences: a person's phrase ("every weekday at 8") as an RFC 5545 RRULE, or a 5-field cron
expression, walked in the person's zone.

Rules are walked as naive local wall-clock times (``dateutil.rrule`` / ``croniter``); every instant
comes from ``zones.to_instant``, so DST is handled once: a daily 02:30 fires at 03:30 on the
spring-forward day and once (the first 02:30) on the fall-back day. ``parse_phrase`` understands a
small, predictable grammar and says what it understood (``Recurrence.describe``): the tools show that
back to the person before they confirm, so a misunderstanding is visible rather than silent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from croniter import croniter
from dateutil.rrule import rrulestr

from gateway.schedule.zones import to_instant, to_local


class RuleError(ValueError):
    """A phrase or rule that cannot be scheduled; the message says what was not understood."""


_DAYS = {"mo": "MO", "tu": "TU", "we": "WE", "th": "TH", "fr": "FR", "sa": "SA", "su": "SU"}
_DAY_NAMES = {"MO": "Monday", "TU": "Tuesday", "WE": "Wednesday", "TH": "Thursday", "FR": "Friday",
              "SA": "Saturday", "SU": "Sunday"}
_DAY_WORD = re.compile(r"\b(mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day)?s?\b|\b(monday|tuesday|wednesday|"
                       r"thursday|friday|saturday|sunday)s?\b")
_PARTS_OF_DAY = {"morning": (8, 0), "afternoon": (14, 0), "evening": (18, 0), "night": (21, 0),
                 "noon": (12, 0), "midday": (12, 0), "midnight": (0, 0)}
_TIME = re.compile(r"\bat\s+(\d{1,2})(?:[:.h](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?(?!\w)|\b(\d{1,2}):(\d{2})\b"
                   r"|\b(\d{1,2})\s*(am|pm)\b")
_EVERY_N = re.compile(r"\bevery\s+(\d{1,3}|other)\s+(minute|hour|day|week|month|year)s?\b")
_MONTHDAY = re.compile(r"\b(?:on\s+)?the\s+(\d{1,2})(?:st|nd|rd|th)?\b")
_FREQ_WORDS = {"minute": "MINUTELY", "hour": "HOURLY", "day": "DAILY", "week": "WEEKLY", "month": "MONTHLY",
               "year": "YEARLY"}
DEFAULT_TIME = (9, 0)  # a rule with no time of day: a reminder at 9 in the morning, said back to the person


@dataclass(frozen=True, slots=True)
class Recurrence:
    kind: Literal["rrule", "cron"]
    expr: str  # "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=0" or "0 8 * * 1-5"
    since: date | None = None  # the anchor of an INTERVAL (every 2 weeks from this date)

    def next_local(self, after: datetime) -> datetime | None:
        """The first local slot strictly after the naive local time ``after``."""
        if self.kind == "cron":
            return croniter(self.expr, after).get_next(datetime)  # type: ignore[no-any-return]
        anchor = datetime.combine(self.since, datetime.min.time()) if self.since else \
            (after - timedelta(days=7)).replace(hour=0, minute=0, second=0, microsecond=0)
        anchor = min(anchor, after)
        rule = rrulestr(self.expr, dtstart=anchor, cache=False)
        return rule.after(after, inc=False)  # type: ignore[no-any-return]

    def describe(self) -> str:
        return describe(self)

    @property
    def text(self) -> str:
        """How it is stored: ``rrule:FREQ=...`` or ``cron:0 8 * * 1-5``."""
        return f"{self.kind}:{self.expr}"


def next_occurrence(rec: Recurrence, tz: ZoneInfo, after: datetime) -> datetime | None:
    """The first instant of ``rec`` in ``tz`` strictly after the instant ``after`` (UTC)."""
    local = to_local(after, tz)
    for _ in range(10_000):  # a slot shifted past a gap may land at or before ``after``: walk on
        slot = rec.next_local(local)
        if slot is None:
            return None
        instant = to_instant(slot, tz)
        if instant > after:
            return instant
        local = slot
    return None


def latest_due(rec: Recurrence, tz: ZoneInfo, after: datetime, now: datetime) -> datetime | None:
    """The latest instant in (after, now]: after downtime the latest missed occurrence fires once."""
    found = None
    cursor = after
    if now - after > timedelta(days=2):
        cursor = now - timedelta(days=2)  # older misses are superseded anyway; bounds the walk
    for _ in range(100_000):
        nxt = next_occurrence(rec, tz, cursor)
        if nxt is None or nxt > now:
            return found
        found, cursor = nxt, nxt
    return found


def parse_stored(text: str, since: date | None = None) -> Recurrence:
    """``rrule:...`` / ``cron:...`` (as the files keep it), a bare RRULE or a bare cron expression."""
    raw = text.strip()
    kind, _, rest = raw.partition(":")
    if kind.lower() in ("rrule", "cron") and rest:
        return _checked(Recurrence(kind.lower(), rest.strip(), since))  # type: ignore[arg-type]
    if raw.upper().startswith("FREQ="):
        return _checked(Recurrence("rrule", raw, since))
    if len(raw.split()) == 5:
        return _checked(Recurrence("cron", raw, since))
    raise RuleError(f"not a rule: {raw!r} (expected rrule:FREQ=... or cron:M H D M W)")


def _checked(rec: Recurrence) -> Recurrence:
    if rec.kind == "cron":
        if len(rec.expr.split()) != 5 or not croniter.is_valid(rec.expr):
            raise RuleError(f"invalid cron expression {rec.expr!r} (5 fields: minute hour day month weekday)")
        return rec
    if ";" in rec.expr and "DTSTART" in rec.expr.upper():
        raise RuleError("DTSTART is not allowed in a rule; the start is 'since='")
    try:
        rrulestr(rec.expr, dtstart=datetime(2026, 1, 1))
    except (ValueError, TypeError) as exc:
        raise RuleError(f"invalid RRULE {rec.expr!r}: {exc}") from None
    fields = _fields(rec.expr)
    if fields.get("FREQ") in ("SECONDLY",):
        raise RuleError("a rule more often than once a minute is not scheduled")
    return rec


def _fields(expr: str) -> dict[str, str]:
    out = {}
    for part in expr.strip().removeprefix("RRULE:").split(";"):
        key, _, value = part.partition("=")
        if key:
            out[key.strip().upper()] = value.strip().upper()
    return out


def parse_phrase(phrase: str, *, today: date | None = None) -> Recurrence:
    """"every weekday at 8", "on Sunday evenings", "every 2 weeks on Tuesday at 10:30", "every month on
    the 1st at 9am", "every day at 18:00", "hourly"; also a bare RRULE or cron expression."""
    text = " ".join(phrase.lower().replace(",", " , ").split())
    if not text:
        raise RuleError("say when it repeats, e.g. 'every weekday at 8'")
    try:
        return parse_stored(phrase)
    except RuleError:
        pass
    freq, interval = "", 1
    m = _EVERY_N.search(text)
    if m:
        interval = 2 if m[1] == "other" else int(m[1])
        freq = _FREQ_WORDS[m[2]]
        if interval < 1:
            raise RuleError("the interval must be at least 1")
    days: list[str] = []
    if re.search(r"\bweekdays?\b", text):
        days = ["MO", "TU", "WE", "TH", "FR"]
    elif re.search(r"\bweekends?\b", text):
        days = ["SA", "SU"]
    else:
        for dm in _DAY_WORD.finditer(text):
            code = _DAYS[(dm[1] or dm[2])[:2]]
            if code not in days:
                days.append(code)
    monthday = None
    md = _MONTHDAY.search(text)
    if md:
        monthday = int(md[1])
        if not 1 <= monthday <= 31:
            raise RuleError(f"there is no day {monthday} in a month")
    if not freq:
        if re.search(r"\b(hourly|every hour)\b", text):
            freq = "HOURLY"
        elif re.search(r"\b(yearly|annually|every year)\b", text):
            freq = "YEARLY"
        elif monthday is not None or re.search(r"\b(monthly|every month)\b", text):
            freq = "MONTHLY"
        elif days or re.search(r"\b(weekly|every week)\b", text):
            freq = "WEEKLY"
        elif re.search(r"\b(daily|every day|each day|every (morning|evening|night|afternoon))\b", text):
            freq = "DAILY"
        else:
            raise RuleError(f"I could not tell how often {phrase!r} repeats; say e.g. 'every day at 8', "
                            "'every Monday at 9', 'every month on the 1st'")
    hour, minute = _time_of(text)
    parts = [f"FREQ={freq}"]
    if interval > 1:
        parts.append(f"INTERVAL={interval}")
    if days and freq in ("WEEKLY", "DAILY"):
        if freq == "DAILY":
            parts[0] = "FREQ=WEEKLY"
        parts.append("BYDAY=" + ",".join(sorted(days, key=list(_DAYS.values()).index)))
    if monthday is not None and freq in ("MONTHLY", "YEARLY"):
        parts.append(f"BYMONTHDAY={monthday}")
    if freq == "YEARLY" and today is not None:
        parts.append(f"BYMONTH={today.month}")
        if monthday is None:
            parts.append(f"BYMONTHDAY={today.day}")
    if freq == "MINUTELY":
        parts.append("BYSECOND=0")
    elif freq == "HOURLY":
        parts.append(f"BYMINUTE={minute if hour is not None else 0};BYSECOND=0")
    else:
        h, mi = (hour, minute) if hour is not None else DEFAULT_TIME
        parts.append(f"BYHOUR={h};BYMINUTE={mi};BYSECOND=0")
    return _checked(Recurrence("rrule", ";".join(parts), today if interval > 1 else None))


def _time_of(text: str) -> tuple[int | None, int]:
    m = _TIME.search(text)
    if m:
        if m[1] is not None:
            hour, minute, ampm = int(m[1]), int(m[2] or 0), (m[3] or "").replace(".", "")
        elif m[4] is not None:
            hour, minute, ampm = int(m[4]), int(m[5]), ""
        else:
            hour, minute, ampm = int(m[6]), 0, m[7]
        if ampm == "pm" and hour < 12:
            hour += 12
        elif ampm == "am" and hour == 12:
            hour = 0
        elif not ampm and re.search(r"\b(evening|evenings|night|nights|afternoon|afternoons)\b", text) and hour < 12:
            hour += 12  # "Sunday evenings at 7"
        if not (0 <= hour <= 23 and 0 <= minute <= 59):
            raise RuleError(f"{m[0].strip()!r} is not a time of day")
        return hour, minute
    for word, (h, mi) in _PARTS_OF_DAY.items():
        if re.search(rf"\b{word}s?\b", text):
            return h, mi
    return None, 0


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe(rec: Recurrence) -> str:
    """What a rule means, in words, for the person to confirm ("every weekday at 08:00")."""
    if rec.kind == "cron":
        return f"on the cron schedule '{rec.expr}'"
    f = _fields(rec.expr)
    freq, interval = f.get("FREQ", ""), int(f.get("INTERVAL", "1") or 1)
    unit = {"MINUTELY": "minute", "HOURLY": "hour", "DAILY": "day", "WEEKLY": "week", "MONTHLY": "month",
            "YEARLY": "year"}.get(freq, freq.lower())
    head = f"every {interval} {unit}s" if interval > 1 else f"every {unit}"
    days = [d[-2:] for d in f.get("BYDAY", "").split(",") if d]
    if freq == "WEEKLY" and days:
        if days == ["MO", "TU", "WE", "TH", "FR"] and interval == 1:
            head = "every weekday"
        elif days == ["SA", "SU"] and interval == 1:
            head = "every weekend day"
        else:
            names = [_DAY_NAMES.get(d, d) for d in days]
            on = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            head = f"every {on}" if interval == 1 else f"{head} on {on}"
    if f.get("BYMONTHDAY"):
        head += " on the " + ", ".join(_ordinal(int(d)) for d in f["BYMONTHDAY"].split(",") if d.lstrip("-").isdigit())
    if f.get("BYMONTH") and freq == "YEARLY":
        head += f" of month {f['BYMONTH']}"
    if "BYHOUR" in f:
        hours = f["BYHOUR"].split(",")
        minute = int((f.get("BYMINUTE") or "0").split(",")[0])
        head += " at " + ", ".join(f"{int(h):02d}:{minute:02d}" for h in hours)
    elif freq == "HOURLY" and "BYMINUTE" in f:
        head += f" at minute {int(f['BYMINUTE'].split(',')[0]):02d}"
    return head
