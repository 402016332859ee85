"""/tz on any channel: shows the zone, sets a valid IANA zone (suggesting close names for a wrong one),
re-arms the person's items in the new zone; the first reply offers it once."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.schedule import engine
from gateway.schedule.items import REMINDERS
from gateway.testing import message


async def test_tz_shows_validates_and_sets(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC), timezone="UTC")
    gw = h.gw
    reply = await gw.handle_inbound(message("/tz"))
    assert reply is not None and reply.notice and "Your time zone is UTC" in reply.text
    reply = await gw.handle_inbound(message("/tz Berlin"))
    assert reply is not None and "not a time zone" in reply.text and "Europe/Berlin" in reply.text
    reply = await gw.handle_inbound(message("/tz Mars/Olympus_Mons"))
    assert reply is not None and "not a time zone" in reply.text
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None and gw.state.users.get(uid).timezone == "UTC"  # type: ignore[union-attr]
    reply = await gw.handle_inbound(message("/tz Europe/Berlin"))
    assert reply is not None and "now Europe/Berlin" in reply.text
    assert gw.state.users.get(uid).timezone == "Europe/Berlin"  # type: ignore[union-attr]
    reply = await gw.handle_inbound(message("/tz", channel="telegram"))  # another channel, another person
    assert reply is not None and "UTC" in reply.text


async def test_changing_the_zone_rearms_recurring_items(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, REMINDERS, "- [ ] every day at 09:00: stretch\n")
    await engine.sync_user(h.gw, uid)
    await h.gw.handle_inbound(message("/tz Australia/Sydney"))
    assert h.gw.state.users.get(uid).timezone == "Australia/Sydney"  # type: ignore[union-attr]
    fired = await h.walk(datetime(2026, 6, 1, 23, 59, tzinfo=UTC))
    # 09:00 in Sydney (23:00 UTC the day before) came first; the 09:00 UTC job found it was not due
    assert fired == [datetime(2026, 6, 1, 23, 0, tzinfo=UTC)]


async def test_the_first_reply_offers_the_zone_once(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC), identity={"offer_timezone": True})
    first = await h.gw.handle_inbound(message("hello", account="bob"))
    assert first is not None and first.text.endswith(
        "(I assumed the time zone UTC for you; say /tz Europe/Berlin or your own zone to change it.)")
    second = await h.gw.handle_inbound(message("hello again", account="bob"))
    assert second is not None and "/tz" not in second.text


async def test_the_settings_api_zone_change_rearms_too(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 5, 31, 12, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, REMINDERS, "- [ ] every day at 09:00: stretch\n")
    await engine.sync_user(h.gw, uid)
    h.gw.state.users.set_timezone(uid, "Asia/Tokyo")  # what PATCH /api/users/{uid}/settings does, then:
    await h.gw.hooks.conversation_changed(h.gw, user_id=uid)
    assert await h.walk(datetime(2026, 6, 1, 1, tzinfo=UTC)) == [datetime(2026, 6, 1, 0, 0, tzinfo=UTC)]


async def test_help_lists_tz(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    reply = await h.gw.handle_inbound(message("/help"))
    assert reply is not None and "/tz ZONE: set it (an IANA name such as Europe/Berlin)" in reply.text
