"""The calendar tools (plugins/tools/calendar_tool.py) against a real CalDAV server: Radicale, started
by the test on port 0 in tmp_path (its WSGI app in a thread), spoken to by kith's CalDAV client
(plugins/tools/caldav_ops.py) through the SSRF guard, which reaches 127.0.0.1 only because the test
allows it (``tools.calendar.allow_hosts``).

One person connects their calendar, the model creates a weekly event across the end of summer time,
lists it, moves one occurrence and cancels another, each change only after that person's /approve;
the briefing shows the day's events; the password is found nowhere but in its encrypted file, and
erasing the person removes that.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from gateway.app import Gateway
from gateway.approvals import Approvals
from gateway.tools import ToolError
from gateway.types import InboundMessage
from plugins.tools.calendar_tool import parse_when
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.kinds import TURN
from tests.fakes.radicale_server import radicale_server

PASSWORD = "canary-Pa55word-7f3a"  # found nowhere but in the encrypted file
BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
def radicale(tmp_path: Path) -> Iterator[str]:
    """A Radicale server with user alice (htpasswd) and her calendar "Personal"; yields alice's URL."""
    with radicale_server(tmp_path, "alice", PASSWORD) as url:
        yield url


def dm(text: str, account: str = "alice") -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, conversation_id=account, text=text, trusted=True,
                          timestamp=datetime.now(UTC))


def result_text(fake: FakeAnthropic) -> str:
    chat = [i for i, body in enumerate(fake.requests) if fake.kind_of(body) == TURN]  # not a background job's
    (result,) = fake.tool_results(chat[-1])
    content = result["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


async def model_calls(gw: Gateway, fake: FakeAnthropic, tool: str, args: dict[str, Any]) -> str:
    fake.enqueue_tool_use(tool, args)
    fake.enqueue("ok")
    await gw.handle_inbound(dm("calendar please"))
    return result_text(fake)


async def change(gw: Gateway, fake: FakeAnthropic, args: dict[str, Any]) -> str:
    """The model asks for a change; nothing happens until alice approves it. Returns the approval id."""
    text = await model_calls(gw, fake, "calendar_change", args)
    assert text.startswith("NOT DONE YET"), text
    match = re.search(r"/approve ([0-9a-f]+)", text)
    assert match is not None
    return match.group(1)


async def command(gw: Gateway, text: str, account: str = "alice") -> str:
    reply = await gw.handle_inbound(dm(text, account))
    assert reply is not None
    return reply.text


def files_holding(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".sock") and needle in p.read_bytes()]


def test_local_times_in_the_persons_zone_and_the_clock_change() -> None:
    assert parse_when("2026-10-19", BERLIN) == date(2026, 10, 19)
    assert parse_when("2026-10-26T09:00", BERLIN) == datetime(2026, 10, 26, 9, 0, tzinfo=BERLIN)
    assert parse_when("2026-10-26T08:00+00:00", BERLIN).utcoffset().total_seconds() == 3600  # type: ignore[union-attr]
    with pytest.raises(ToolError, match="does not exist"):
        parse_when("2026-03-29T02:30", BERLIN)  # clocks jump from 02:00 to 03:00
    with pytest.raises(ToolError, match="not an ISO"):
        parse_when("next tuesday", BERLIN)


def test_an_approval_expires_and_only_its_person_can_take_it() -> None:
    book = Approvals(ttl_s=600)
    p = book.request(user_id="alice", tool="calendar_change", args={"action": "cancel"}, summary="Cancel x.")
    assert book.take(p.approval_id, "bob") == (None, f"no pending approval {p.approval_id!r} (it may have expired)")
    assert book.take(p.approval_id, "alice")[0] == p
    gone = Approvals(ttl_s=0)
    q = gone.request(user_id="alice", tool="calendar_change", args={}, summary="s")
    assert gone.take(q.approval_id, "alice")[0] is None
    assert [e.outcome for e in gone.audit] == ["requested", "expired"]


@pytest.fixture
async def connected(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],
                    radicale: str) -> Gateway:
    """A gateway with the calendar tools on, where alice connected her Radicale calendar (after a wrong
    password was refused), and a weekly Standup over the end of summer time (25 Oct 2026) exists."""
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, timezone="Europe/Berlin",
                            tools={"calendar": {"enabled": True, "allow_hosts": ["127.0.0.1"]}})
    fake_anthropic.enqueue("hi")
    await gw.handle_inbound(dm("hi"))
    assert "calendar_list" not in fake_anthropic.tool_names(), "not offered before the person connects one"
    assert "refused the user name or password" in await command(gw, f"/calendar connect {radicale} alice wrong")
    answer = await command(gw, f"/calendar connect {radicale} alice {PASSWORD}")
    assert answer.startswith("Calendar connected (Personal)") and PASSWORD not in answer

    approval = await change(gw, fake_anthropic, {"action": "create", "title": "Standup", "start": "2026-10-19T09:00",
                                                 "end": "2026-10-19T09:15", "repeat": "FREQ=WEEKLY;COUNT=3"})
    assert "Create the event 'Standup', Mon 19 Oct 2026 09:00" in result_text(fake_anthropic)
    assert "calendar_change" in fake_anthropic.offered_tools(-2), "offered once connected"
    assert "no pending approval" in await command(gw, f"/approve {approval}", account="bob")
    assert (await listing(gw, fake_anthropic)) == [], "nothing is created before the approval"
    done = await command(gw, f"/approve {approval}")
    assert done.startswith("Done: Create the event 'Standup'"), done
    assert "no pending approval" in await command(gw, f"/approve {approval}"), "an approval is used once"
    return gw


async def listing(gw: Gateway, fake: FakeAnthropic) -> list[str]:
    listed = await model_calls(gw, fake, "calendar_list", {"start": "2026-10-19", "days": 21})
    return re.findall(r"- (\w{3} \d\d \w{3} 2026 \d\d:\d\d-\d\d:\d\d) Standup", listed)


async def event_id(gw: Gateway, fake: FakeAnthropic) -> str:
    listed = await model_calls(gw, fake, "calendar_list", {"start": "2026-10-19", "days": 1})
    match = re.search(r"\(id (\S+), repeats\)", listed)
    assert match is not None, listed
    return match.group(1)


async def test_a_recurring_event_across_the_clock_change_the_briefing_and_the_password(
        connected: Gateway, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture) -> None:
    gw = connected
    assert await listing(gw, fake_anthropic) == ["Mon 19 Oct 2026 09:00-09:15", "Mon 26 Oct 2026 09:00-09:15",
                                                 "Mon 02 Nov 2026 09:00-09:15"], "09:00 local on both sides of DST"
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    from plugins.briefing import run_briefing

    briefing = await run_briefing(gw, uid, datetime(2026, 10, 26, 6, 0, tzinfo=UTC))
    assert "Today's calendar" in briefing and "09:00-09:15 Standup" in briefing

    from gateway.tools import approvals

    assert [e.outcome for e in approvals(gw).audit] == ["requested", "refused", "approved", "done"]

    # The canary password: stored encrypted, 0600, and in no log line, model request or other file.
    secret = Path(gw.config.data_dir) / "users" / uid / ".credentials" / "calendar.enc"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE((Path(gw.config.data_dir) / "secrets.key").stat().st_mode) == 0o600
    assert PASSWORD not in caplog.text
    assert all(PASSWORD not in str(r) for r in fake_anthropic.requests)
    assert files_holding(Path(gw.config.data_dir), PASSWORD.encode()) == []

    import tarfile

    from gateway.identity.export import export_user

    archive = Path(gw.config.data_dir).parent / "alice.tar.gz"
    export_user(gw.state, Path(gw.config.data_dir), uid, archive)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert names and not any(".credentials" in n for n in names), "never in an export, not even encrypted"

    from gateway.identity.erase import erase_person

    await erase_person(gw, uid)
    assert not secret.exists(), "kith users delete removes the credentials"


async def test_move_and_cancel_occurrences_deny_and_cancel_the_series(
        connected: Gateway, fake_anthropic: FakeAnthropic) -> None:
    gw = connected
    eid = await event_id(gw, fake_anthropic)
    approval = await change(gw, fake_anthropic, {"action": "move", "id": eid, "occurrence": "2026-10-26T09:00",
                                                 "new_start": "2026-10-26T11:00"})
    assert (await command(gw, f"/approve {approval}")).startswith("Done: Move the occurrence")
    approval = await change(gw, fake_anthropic, {"action": "cancel", "id": eid, "occurrence": "2026-11-02T09:00"})
    assert (await command(gw, f"/approve {approval}")).startswith("Done: Cancel the occurrence")
    assert await listing(gw, fake_anthropic) == ["Mon 19 Oct 2026 09:00-09:15", "Mon 26 Oct 2026 11:00-11:15"]

    approval = await change(gw, fake_anthropic, {"action": "cancel", "id": eid})
    assert (await command(gw, f"/deny {approval}")).startswith("Denied; nothing was done")
    assert len(await listing(gw, fake_anthropic)) == 2
    approval = await change(gw, fake_anthropic, {"action": "cancel", "id": eid})
    assert (await command(gw, f"/approve {approval}")).startswith("Done: Cancel the event")
    assert await listing(gw, fake_anthropic) == []

    from gateway.tools import approvals

    outcomes = [e.outcome for e in approvals(gw).audit]
    assert outcomes.count("requested") == 5 and outcomes.count("done") == 4 and outcomes.count("denied") == 1

    # Off-The-Record: the calendar is read, never changed, and an approval waiting from before is refused.
    approval = await change(gw, fake_anthropic, {"action": "create", "title": "Secret", "start": "2026-10-20"})
    await command(gw, "/otr on")
    fake_anthropic.enqueue("ok")
    await gw.handle_inbound(dm("what's on?"))
    assert "calendar_list" in fake_anthropic.tool_names() and "calendar_change" not in fake_anthropic.offered_tools()
    assert "Off-The-Record" in await command(gw, f"/approve {approval}")
    await command(gw, "/otr off")
    assert await listing(gw, fake_anthropic) == []


async def test_the_guard_keeps_the_password_off_private_hosts_and_plain_http(radicale: str) -> None:
    from gateway.tool_settings import CalendarConfig
    from plugins.tools.caldav_ops import Account, CalendarError
    from plugins.tools.calendar_tool import connect

    on = CalendarConfig(enabled=True)
    with pytest.raises(CalendarError, match="private or reserved"):
        async with connect(Account(radicale.replace("http:", "https:"), "alice", PASSWORD), on):
            pass
    with pytest.raises(CalendarError, match="must use https"):
        async with connect(Account("http://calendar.example.com/dav/", "alice", PASSWORD), on):
            pass
    allowed = CalendarConfig(enabled=True, allow_hosts=["127.0.0.1"])
    async with connect(Account(radicale, "alice", PASSWORD), allowed) as dav:
        assert dav.calendar_name == "Personal"
        with pytest.raises(CalendarError, match="another host"):
            await dav.request("GET", "http://169.254.169.254/latest/")
    assert PASSWORD not in repr(Account(radicale, "alice", PASSWORD))


SERIES = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:s1
SUMMARY:Yoga
DTSTART;TZID=Europe/Berlin:20261020T180000
DTEND;TZID=Europe/Berlin:20261020T190000
RRULE:FREQ=WEEKLY
EXDATE;TZID=Europe/Berlin:20261103T180000
END:VEVENT
BEGIN:VEVENT
UID:s1
RECURRENCE-ID;TZID=Europe/Berlin:20261027T180000
SUMMARY:Yoga (moved)
DTSTART;TZID=Europe/Berlin:20261028T200000
DTEND;TZID=Europe/Berlin:20261028T210000
END:VEVENT
BEGIN:VEVENT
UID:m1
SUMMARY:Every minute since 2000
DTSTART:20000101T000000Z
RRULE:FREQ=MINUTELY
END:VEVENT
END:VCALENDAR
"""


def test_expansion_keeps_local_time_honours_exdates_and_overrides_and_is_bounded() -> None:
    from plugins.tools.caldav_ops import expand

    start, end = datetime(2026, 10, 19, tzinfo=BERLIN), datetime(2026, 11, 17, tzinfo=BERLIN)
    found = sorted((o.start.astimezone(BERLIN), o.title) for o in expand(SERIES, start, end)  # type: ignore[union-attr]
                   if o.uid == "s1")
    assert [(f"{s:%d %b %H:%M}", t) for s, t in found] == [
        ("20 Oct 18:00", "Yoga"), ("28 Oct 20:00", "Yoga (moved)"), ("10 Nov 18:00", "Yoga")]
    assert expand("not a calendar", start, end) == []


def test_the_calendar_without_its_extra_is_a_config_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    import plugins.tools
    from gateway.config import Config

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "icalendar" else real(name, *a))
    assert plugins.tools.problems(Config(tools={"calendar": {"enabled": True}})) == [
        "tools.calendar.enabled: the calendar needs icalendar (pip install 'kith[calendar]')"]
    assert plugins.tools.problems(Config()) == []
