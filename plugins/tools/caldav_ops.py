"""A small CalDAV client (RFC 4791) over httpx, every request through the SSRF guard, and the event
edits on iCalendar data (``icalendar``).

Why not the ``caldav`` package: it requires ``niquests``, whose ``urllib3-future`` installs itself
*as* ``urllib3`` and replaces the one ``requests`` and others use in the same environment; and its
HTTP stack cannot be pinned to the address the guard checked. What kith needs is six requests:
PROPFIND for discovery (current-user-principal, calendar-home-set, the calendars), REPORT
calendar-query (a time range, expanded by the server, RFC 4791 9.6.5; or one UID), PUT (with
``If-None-Match: *`` to create, ``If-Match`` to change) and DELETE (``If-Match``).

A server's answer is untrusted: XML is parsed with ``defusedxml``, every body is read with a byte cap,
and an ``href`` that points to another origin is refused (the person's password goes only to the
origin they connected). A recurring event is expanded by the server on listing; moving or cancelling
one occurrence writes an override (``RECURRENCE-ID``) or an ``EXDATE`` on the series, the standard
iCalendar way every client understands.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from types import TracebackType
from typing import Any
from urllib.parse import quote, urljoin
from xml.sax.saxutils import escape

import httpx

from plugins.tools import pinned_http
from plugins.tools.netguard import Allowlist, BlockedAddress

DAV = "{DAV:}"
CAL = "{urn:ietf:params:xml:ns:caldav}"
MAX_RESPONSE_BYTES = 5_000_000
_XMLNS = 'xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"'


@dataclass(frozen=True, slots=True)
class Account:
    url: str
    username: str
    password: str
    calendar: str = ""  # a calendar's display name or URL; "" = the first one

    def __repr__(self) -> str:  # never the password, whatever prints it
        return f"Account(url={self.url!r}, username={self.username!r}, calendar={self.calendar!r})"


@dataclass(frozen=True, slots=True)
class Occurrence:
    uid: str
    title: str
    start: datetime | date
    end: datetime | date | None
    recurring: bool
    location: str = ""


@dataclass(frozen=True, slots=True)
class Stored:
    """One calendar object resource: where it is, its version, its iCalendar text."""

    href: str
    etag: str
    ical: bytes


class CalendarError(Exception):
    """A failure to show the person (no secrets in the message)."""


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


class CalDAV:
    """``async with CalDAV(account, timeout_s=..., allow=...) as dav``: one connection pool per use."""

    def __init__(self, account: Account, *, timeout_s: float, allow: Allowlist) -> None:
        self.account = account
        self.allow = allow
        self.timeout_s = timeout_s
        scheme, host, port = pinned_http.origin(account.url)
        self._origin = (scheme, host.lower(), port)
        token = base64.b64encode(f"{account.username}:{account.password}".encode()).decode()
        self._auth = f"Basic {token}"
        self._http: httpx.AsyncClient | None = None
        self.calendar_url = ""
        self.calendar_name = ""

    async def __aenter__(self) -> CalDAV:
        self._http = pinned_http.client(self.timeout_s)
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._http is not None:
            await self._http.aclose()

    # -------------------------------------------------------------------------------------- wire

    def _same_origin(self, url: str) -> str:
        try:
            scheme, host, port = pinned_http.origin(url)
        except ValueError as exc:
            raise CalendarError("the server named an invalid URL") from exc
        if (scheme, host.lower(), port) != self._origin:
            raise CalendarError("the server pointed to another host; refused (the password goes only to yours)")
        return url

    async def request(self, method: str, url: str, *, body: bytes | None = None, depth: str | None = None,
                      headers: dict[str, str] | None = None) -> tuple[int, httpx.Headers, bytes]:
        assert self._http is not None, "use CalDAV as an async context manager"
        url = self._same_origin(url)
        sent = {"Authorization": self._auth, **(headers or {})}
        if body is not None and "Content-Type" not in sent:
            sent["Content-Type"] = "application/xml; charset=utf-8"
        if depth is not None:
            sent["Depth"] = depth
        try:
            response = await pinned_http.send(self._http, method, url, self.allow, headers=sent, content=body,
                                              stream=True)
        except BlockedAddress as exc:
            raise CalendarError(str(exc)) from exc
        except ValueError as exc:
            raise CalendarError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise CalendarError(f"the calendar server could not be reached ({type(exc).__name__})") from exc
        try:
            data, size = bytearray(), 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise CalendarError("the calendar server's answer is too large")
                data += chunk
        except httpx.HTTPError as exc:
            raise CalendarError(f"the calendar server's answer broke off ({type(exc).__name__})") from exc
        finally:
            await response.aclose()
        if response.status_code in (401, 403):
            raise CalendarError("the calendar server refused the user name or password")
        return response.status_code, response.headers, bytes(data)

    async def multistatus(self, method: str, url: str, body: str, depth: str) -> list[tuple[str, Any]]:
        """(absolute href, the <prop> of its 200 propstat) per <response>."""
        from defusedxml import ElementTree

        status, _, data = await self.request(method, url, body=body.encode(), depth=depth)
        if status != 207:
            raise CalendarError(f"the calendar server answered HTTP {status} to {method}")
        try:
            root = ElementTree.fromstring(data)
        except Exception as exc:  # defusedxml's refusals and plain parse errors alike
            raise CalendarError("the calendar server's answer is not valid XML") from exc
        out = []
        for response in root.iter(f"{DAV}response"):
            href = (response.findtext(f"{DAV}href") or "").strip()
            if not href:
                continue
            for propstat in response.iter(f"{DAV}propstat"):
                if " 200 " in (propstat.findtext(f"{DAV}status") or "") + " ":
                    prop = propstat.find(f"{DAV}prop")
                    if prop is not None:
                        out.append((urljoin(url, href), prop))
        return out

    # -------------------------------------------------------------------------------------- discovery

    async def open(self) -> CalDAV:
        """Find the calendar: the URL itself when it is one, else the principal's calendar home."""
        props = f'<d:propfind {_XMLNS}><d:prop><d:resourcetype/><d:displayname/><d:current-user-principal/>' \
                '<c:calendar-home-set/></d:prop></d:propfind>'
        found = await self.multistatus("PROPFIND", self.account.url, props, "0")
        if not found:
            raise CalendarError("the URL is not a CalDAV server")
        _, prop = found[0]
        if prop.find(f"{DAV}resourcetype/{CAL}calendar") is not None:
            self.calendar_url, self.calendar_name = self.account.url, prop.findtext(f"{DAV}displayname") or ""
            return self
        home = _href(prop, f"{CAL}calendar-home-set")
        if not home:
            principal = _href(prop, f"{DAV}current-user-principal")
            if principal:
                principal = urljoin(self.account.url, principal)
                again = await self.multistatus("PROPFIND", principal, props, "0")
                home = _href(again[0][1], f"{CAL}calendar-home-set") if again else ""
                home = urljoin(principal, home) if home else ""
        home = urljoin(self.account.url, home) if home else self.account.url
        listing = f'<d:propfind {_XMLNS}><d:prop><d:resourcetype/><d:displayname/></d:prop></d:propfind>'
        calendars = [(href, p.findtext(f"{DAV}displayname") or "")
                     for href, p in await self.multistatus("PROPFIND", home, listing, "1")
                     if p.find(f"{DAV}resourcetype/{CAL}calendar") is not None]
        if not calendars:
            raise CalendarError("the account has no calendar")
        wanted = self.account.calendar
        chosen = next((c for c in calendars if wanted in (c[1], c[0])), None) if wanted else calendars[0]
        if chosen is None:
            raise CalendarError(f"no calendar named {wanted!r}")
        self.calendar_url, self.calendar_name = chosen
        return self

    # -------------------------------------------------------------------------------------- events

    async def occurrences(self, start: datetime, end: datetime, limit: int) -> list[Occurrence]:
        """The events between ``start`` and ``end``, recurring ones expanded here, not by the server:
        servers disagree on expanding a series across a clock change (Radicale keeps the summer offset
        all winter), so the window asked for is a day wider on each side and kith expands the series
        itself in its own timezone (``expand``), then keeps what overlaps the window."""
        span = f'start="{_utc(start - timedelta(days=1))}" end="{_utc(end + timedelta(days=1))}"'
        body = (f'<c:calendar-query {_XMLNS}><d:prop><d:getetag/><c:calendar-data/></d:prop><c:filter>'
                '<c:comp-filter name="VCALENDAR"><c:comp-filter name="VEVENT">'
                f'<c:time-range {span}/></c:comp-filter></c:comp-filter></c:filter></c:calendar-query>')
        out = []
        for _, prop in await self.multistatus("REPORT", self.calendar_url, body, "1"):
            out += expand(prop.findtext(f"{CAL}calendar-data") or "", start, end)
        out.sort(key=lambda o: _sort_key(o.start))
        return out[:limit]

    async def find(self, uid: str) -> Stored:
        body = (f'<c:calendar-query {_XMLNS}><d:prop><d:getetag/><c:calendar-data/></d:prop><c:filter>'
                '<c:comp-filter name="VCALENDAR"><c:comp-filter name="VEVENT"><c:prop-filter name="UID">'
                f'<c:text-match collation="i;octet">{escape(uid)}</c:text-match></c:prop-filter></c:comp-filter>'
                '</c:comp-filter></c:filter></c:calendar-query>')
        for href, prop in await self.multistatus("REPORT", self.calendar_url, body, "1"):
            data = prop.findtext(f"{CAL}calendar-data") or ""
            if data:
                return Stored(href, (prop.findtext(f"{DAV}getetag") or "").strip(), data.encode())
        raise CalendarError(f"no event with id {uid!r}")

    async def put(self, href: str, ical: bytes, *, etag: str = "") -> None:
        headers = {"Content-Type": "text/calendar; charset=utf-8", **({"If-Match": etag} if etag else
                                                                      {"If-None-Match": "*"})}
        status, _, _ = await self.request("PUT", href, body=ical, headers=headers)
        if status == 412:
            raise CalendarError("the event changed meanwhile; list it again")
        if status not in (200, 201, 204):
            raise CalendarError(f"the calendar server answered HTTP {status} when saving")

    async def delete(self, stored: Stored) -> None:
        status, _, _ = await self.request("DELETE", stored.href, headers={"If-Match": stored.etag} if stored.etag
                                          else {})
        if status == 412:
            raise CalendarError("the event changed meanwhile; list it again")
        if status not in (200, 204):
            raise CalendarError(f"the calendar server answered HTTP {status} when deleting")

    async def create(self, ical: bytes, uid: str) -> None:
        base = self.calendar_url if self.calendar_url.endswith("/") else self.calendar_url + "/"
        await self.put(urljoin(base, quote(uid, safe="") + ".ics"), ical)


def _href(prop: Any, tag: str) -> str:
    node = prop.find(tag)
    return (node.findtext(f"{DAV}href") or "").strip() if node is not None else ""


def _value(component: Any, key: str) -> Any:
    prop = component.get(key)
    return getattr(prop, "dt", prop)


MAX_STEPS = 20_000  # occurrences walked per series: an old minutely rule stops here, not at the window


def _aware(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)  # floating time: read as UTC
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def _overlaps(begin: datetime | date, finish: datetime | date | None, start: datetime, end: datetime) -> bool:
    b = _aware(begin)
    f = _aware(finish) if finish is not None else b
    return b < end and (f > start or (f == b and b >= start))


def _occurrence(comp: Any, begin: datetime | date, finish: datetime | date | None, recurring: bool) -> Occurrence:
    return Occurrence(uid=str(comp.get("uid", "")), title=str(comp.get("summary", "(no title)"))[:200],
                      start=begin, end=finish, location=str(comp.get("location", ""))[:200], recurring=recurring)


def _series(master: Any, start: datetime, end: datetime) -> list[tuple[datetime | date, datetime | date | None]]:
    """The (start, end) of every occurrence of ``master`` overlapping the window. Wall-clock times
    repeat in the event's own zone (09:00 stays 09:00 after the clocks change)."""
    from dateutil.rrule import rrulestr

    first = _value(master, "dtstart")
    last = _value(master, "dtend")
    length = (last - first) if last is not None else (timedelta(days=1) if not isinstance(first, datetime)
                                                      else timedelta(0))
    if master.get("rrule") is None:
        return [(first, last)] if _overlaps(first, last, start, end) else []
    all_day = not isinstance(first, datetime)
    anchor = datetime(first.year, first.month, first.day) if all_day else first
    rule = rrulestr(master["rrule"].to_ical().decode(), dtstart=anchor)
    excluded = set()
    exdates = master.get("exdate")
    for group in exdates if isinstance(exdates, list) else [exdates] if exdates is not None else []:
        for item in group.dts:
            excluded.add(_aware(item.dt))
    out = []
    for step, occ in enumerate(rule):
        if step >= MAX_STEPS:
            break
        begin: datetime | date = occ.date() if all_day else occ
        if _aware(begin) >= end:
            break
        if _aware(begin) in excluded:
            continue
        if _overlaps(begin, begin + length, start, end):
            out.append((begin, begin + length))
    return out


def expand(text: str, start: datetime, end: datetime) -> list[Occurrence]:
    """The occurrences in one calendar object resource overlapping [start, end): a single event, or a
    series (RRULE, EXDATE) with its moved occurrences (RECURRENCE-ID overrides) in place."""
    from icalendar import Calendar

    try:
        cal = Calendar.from_ical(text)
    except Exception:  # one broken entry must not hide the others
        return []
    events = [c for c in cal.walk("VEVENT") if _value(c, "dtstart") is not None]
    overrides = {_aware(_value(c, "recurrence-id")): c for c in events if c.get("recurrence-id") is not None}
    out = []
    for comp in events:
        if comp.get("recurrence-id") is not None:
            continue
        recurring = comp.get("rrule") is not None
        try:
            spans = _series(comp, start, end)
        except (ValueError, TypeError):  # a rule dateutil cannot read: show the first occurrence only
            spans = [(_value(comp, "dtstart"), _value(comp, "dtend"))]
        for begin, finish in spans:
            if _aware(begin) not in overrides:
                out.append(_occurrence(comp, begin, finish, recurring))
    for over in overrides.values():
        if str(over.get("status", "")).upper() == "CANCELLED":
            continue
        begin, finish = _value(over, "dtstart"), _value(over, "dtend")
        if _overlaps(begin, finish, start, end):
            out.append(_occurrence(over, begin, finish, True))
    return out


def _sort_key(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


# ------------------------------------------------------------------------------------------ edits


def new_event(*, title: str, start: datetime | date, end: datetime | date, rrule: str = "",
              location: str = "") -> tuple[str, bytes]:
    """(uid, iCalendar bytes) of a new event."""
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
    ical = Calendar()
    ical.add("prodid", "-//kith//calendar tool//EN")
    ical.add("version", "2.0")
    ical.add_component(event)
    if any(isinstance(v, datetime) and v.tzinfo is not None and v.tzinfo is not UTC for v in (start, end)):
        ical.add_missing_timezones()  # VTIMEZONE for the person's zone: clients show the right local time
    return uid, ical.to_ical()


def _master(cal: Any) -> Any:
    for comp in cal.walk("VEVENT"):
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


def _bump(component: Any) -> None:
    seq = int(component.get("sequence", 0)) + 1
    for key in ("sequence", "dtstamp"):
        component.pop(key, None)
    component.add("sequence", seq)
    component.add("dtstamp", datetime.now(UTC))


def moved(ical: bytes, new_start: datetime | date, *, occurrence: datetime | None = None) -> bytes:
    """The event moved to ``new_start`` (the whole series, or the one ``occurrence``), same length."""
    from icalendar import Calendar, Event

    cal = Calendar.from_ical(ical)
    master = _master(cal)
    start = _value(master, "dtstart")
    end = _value(master, "dtend")
    length = (end - start) if end is not None else timedelta(hours=1)
    if occurrence is None:
        for key in ("dtstart", "dtend", "duration"):
            master.pop(key, None)
        master.add("dtstart", new_start)
        master.add("dtend", new_start + length)
        _bump(master)
    else:
        if master.get("rrule") is None:
            raise CalendarError("the event does not repeat; move it without an occurrence")
        override = Event()
        for key in ("uid", "summary", "location", "description"):
            if master.get(key) is not None:
                override.add(key, master.get(key))
        override.add("recurrence-id", _as_series_time(occurrence, start))
        override.add("dtstart", new_start)
        override.add("dtend", new_start + length)
        override.add("dtstamp", datetime.now(UTC))
        cal.add_component(override)
    return bytes(cal.to_ical())


def without_occurrence(ical: bytes, occurrence: datetime) -> bytes:
    """The series with one occurrence cancelled (an EXDATE)."""
    from icalendar import Calendar

    cal = Calendar.from_ical(ical)
    master = _master(cal)
    if master.get("rrule") is None:
        raise CalendarError("the event does not repeat; cancel it without an occurrence")
    master.add("exdate", _as_series_time(occurrence, _value(master, "dtstart")))
    _bump(master)
    return bytes(cal.to_ical())


def in_zone(value: datetime | date, tz: tzinfo) -> datetime | date:
    return value.astimezone(tz) if isinstance(value, datetime) and value.tzinfo else value
