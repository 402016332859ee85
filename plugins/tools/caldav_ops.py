"""CalDAV operations on a person's calendar (``caldav`` + ``icalendar``), blocking: run in a thread.

Times go in and come out aware; the callers (``plugins.tools.calendar``) speak the person's timezone.
A recurring event is expanded on listing (each occurrence with its own start); moving or cancelling
one occurrence writes an override (``RECURRENCE-ID``) or an ``EXDATE`` on the series, the standard
iCalendar way every client understands. The account's URL is checked by the caller (SSRF guard);
RFC 6764 discovery is off so the library never goes looking for other hosts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any


@dataclass(frozen=True, slots=True)
class Account:
    url: str
    username: str
    password: str
    calendar: str = ""  # a calendar's name or URL; "" = the first one


@dataclass(frozen=True, slots=True)
class Occurrence:
    uid: str
    title: str
    start: datetime | date
    end: datetime | date | None
    recurring: bool
    location: str = ""

    @property
    def all_day(self) -> bool:
        return not isinstance(self.start, datetime)


class CalendarError(Exception):
    """A failure to show the person (no secrets in the message)."""


def open_calendar(account: Account, timeout_s: float) -> Any:
    import caldav
    from caldav.lib import error as caldav_error

    client = caldav.DAVClient(url=account.url, username=account.username, password=account.password,
                              timeout=max(1, int(timeout_s)), enable_rfc6764=False)
    try:
        calendars = client.principal().calendars()
    except caldav_error.AuthorizationError as exc:
        raise CalendarError("the calendar server refused the user name or password") from exc
    except Exception as exc:
        raise CalendarError(f"the calendar server could not be reached ({type(exc).__name__})") from exc
    if not calendars:
        raise CalendarError("the account has no calendar")
    if account.calendar:
        for cal in calendars:
            if account.calendar in (cal.get_display_name(), str(cal.url)):
                return cal
        raise CalendarError(f"no calendar named {account.calendar!r}")
    return calendars[0]


def _value(component: Any, key: str) -> Any:
    prop = component.get(key)
    return getattr(prop, "dt", prop)


def list_events(cal: Any, start: datetime, end: datetime, limit: int) -> list[Occurrence]:
    found = cal.search(start=start, end=end, event=True, expand=True)
    out = []
    for obj in found:
        for comp in obj.icalendar_instance.walk("VEVENT"):
            begin = _value(comp, "dtstart")
            if begin is None:
                continue
            finish = _value(comp, "dtend")
            if finish is None and comp.get("duration") is not None:
                finish = begin + comp.get("duration").dt
            out.append(Occurrence(uid=str(comp.get("uid", "")), title=str(comp.get("summary", "(no title)")),
                                  start=begin, end=finish, location=str(comp.get("location", "")),
                                  recurring=comp.get("recurrence-id") is not None or comp.get("rrule") is not None))
    out.sort(key=lambda o: _sort_key(o.start))
    return out[:limit]


def _sort_key(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def create_event(cal: Any, *, title: str, start: datetime | date, end: datetime | date, rrule: str = "",
                 location: str = "", description: str = "") -> str:
    from icalendar import Calendar, Event, vRecur

    uid = f"{uuid.uuid4()}@kith"
    event = Event()
    event.add("uid", uid)
    event.add("dtstamp", datetime.now(UTC))
    event.add("summary", title)
    event.add("dtstart", start)
    event.add("dtend", end)
    if rrule:
        event.add("rrule", vRecur.from_ical(rrule))
    if location:
        event.add("location", location)
    if description:
        event.add("description", description)
    ical = Calendar()
    ical.add("prodid", "-//kith//calendar tool//EN")
    ical.add("version", "2.0")
    ical.add_component(event)
    cal.save_event(ical.to_ical().decode())
    return uid


def _resource(cal: Any, uid: str) -> Any:
    from caldav.lib import error as caldav_error

    try:
        return cal.event_by_uid(uid)
    except caldav_error.NotFoundError as exc:
        raise CalendarError(f"no event with id {uid!r}") from exc


def _master(resource: Any) -> Any:
    for comp in resource.icalendar_instance.walk("VEVENT"):
        if comp.get("recurrence-id") is None:
            return comp
    raise CalendarError("the event has no main entry")


def _as_series_time(occurrence: datetime, series_start: Any) -> datetime | date:
    """An occurrence's start in the form of the series' DTSTART (its timezone, or a date)."""
    if not isinstance(series_start, datetime):
        return occurrence.date()
    if series_start.tzinfo is None:
        return occurrence.replace(tzinfo=None)
    return occurrence.astimezone(series_start.tzinfo)


def move_event(cal: Any, uid: str, new_start: datetime | date, *, occurrence: datetime | None = None) -> str:
    """Move the event (the whole series, or the one ``occurrence``) to ``new_start``, keeping its length."""
    resource = _resource(cal, uid)
    master = _master(resource)
    start = _value(master, "dtstart")
    end = _value(master, "dtend")
    length = (end - start) if end is not None else timedelta(hours=1)
    if occurrence is None:
        master["dtstart"].dt = new_start  # type: ignore[index]
        if end is not None:
            master["dtend"].dt = new_start + length  # type: ignore[index]
        _bump(master)
    else:
        if master.get("rrule") is None:
            raise CalendarError("the event does not repeat; move it without an occurrence")
        from icalendar import Event

        override = Event()
        for key in ("uid", "summary", "location", "description"):
            if master.get(key) is not None:
                override.add(key, master.get(key))
        override.add("recurrence-id", _as_series_time(occurrence, start))
        override.add("dtstart", new_start)
        override.add("dtend", new_start + length)
        override.add("dtstamp", datetime.now(UTC))
        resource.icalendar_instance.add_component(override)
    resource.save()
    return uid


def cancel_event(cal: Any, uid: str, *, occurrence: datetime | None = None) -> str:
    """Delete the event (the whole series), or only the one ``occurrence`` of a series (an EXDATE)."""
    resource = _resource(cal, uid)
    if occurrence is None:
        resource.delete()
        return uid
    master = _master(resource)
    if master.get("rrule") is None:
        raise CalendarError("the event does not repeat; cancel it without an occurrence")
    master.add("exdate", _as_series_time(occurrence, _value(master, "dtstart")))
    _bump(master)
    resource.save()
    return uid


def _bump(component: Any) -> None:
    seq = int(component.get("sequence", 0)) + 1
    component.pop("sequence", None)
    component.add("sequence", seq)
    component.pop("dtstamp", None)
    component.add("dtstamp", datetime.now(UTC))


def in_zone(value: datetime | date, tz: tzinfo) -> datetime | date:
    return value.astimezone(tz) if isinstance(value, datetime) and value.tzinfo else value
