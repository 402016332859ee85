"""Delivery guarantees on a real gateway: quiet hours hold a message until their end, a platform that
is down is retried, and a crash between send and record costs at most one duplicate, never the message."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from gateway.app import Gateway
from gateway.delivery.outbox import LEASE_S, deliver
from gateway.delivery.quiet import window_end
from gateway.delivery.sweep import sweep_once
from gateway.state.delivery import DeliveryPrefs
from gateway.testing import GatewayFactory, message
from gateway.types import ConversationAddress, Reply
from tests.delivery.test_outbox import Recorder, RecorderPlugin, _reset


async def _person(kith_gateway: GatewayFactory, tz: str = "UTC") -> tuple[Gateway, str]:
    _reset()
    gw = await kith_gateway(plugins=(RecorderPlugin(),))
    await gw.handle_inbound(message("hi", account="kim", channel="recorder"))
    uid = gw.identities.lookup("recorder", "kim")
    assert uid is not None
    gw.state.users.set_timezone(uid, tz)
    Recorder.sent.clear()
    return gw, uid


async def test_quiet_hours_hold_until_the_window_ends_in_the_persons_zone(kith_gateway: GatewayFactory) -> None:
    gw, uid = await _person(kith_gateway, "Asia/Tokyo")
    tz = ZoneInfo("Asia/Tokyo")
    now = datetime.now(UTC)
    local = now.astimezone(tz)
    start, end = (local - timedelta(hours=1)).strftime("%H:%M"), (local + timedelta(hours=1)).strftime("%H:%M")
    gw.state.outbox.set_prefs(uid, DeliveryPrefs(quiet_start=start, quiet_end=end))
    await deliver(gw, user_id=uid, text="Reminder: pills", kind="reminder", origin=None, delivery_id="q1")
    entry = gw.state.outbox.get("q1")
    assert entry.status == "pending" and Recorder.sent == [] and "quiet hours" in entry.detail
    held_until = entry.due_at
    assert held_until.astimezone(tz).strftime("%H:%M") == end
    assert now < held_until <= now + timedelta(hours=1, minutes=1)
    assert await sweep_once(gw, now=held_until - timedelta(seconds=5)) == 0
    await sweep_once(gw, now=held_until + timedelta(seconds=1))
    assert Recorder.sent == [("kim", "Reminder: pills")]
    assert gw.state.outbox.get("q1").status == "sent"


def test_window_end_wraps_midnight_and_keeps_wall_clock_across_dst() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    s, e = time(22, 0), time(7, 0)
    # 23:30 local: held until 07:00 the next morning; 12:00: not quiet; 06:59: until 07:00 the same day.
    at = datetime(2026, 6, 1, 23, 30, tzinfo=berlin)
    assert window_end(s, e, berlin, at) == datetime(2026, 6, 2, 7, 0, tzinfo=berlin)
    assert window_end(s, e, berlin, datetime(2026, 6, 1, 12, 0, tzinfo=berlin)) is None
    assert window_end(s, e, berlin, datetime(2026, 6, 2, 6, 59, tzinfo=berlin)) == datetime(2026, 6, 2, 7, 0,
                                                                                             tzinfo=berlin)
    # The night clocks go forward (29 March 2026): 22:00-07:00 still ends at 07:00 local (05:00 UTC).
    end = window_end(s, e, berlin, datetime(2026, 3, 28, 23, 0, tzinfo=berlin))
    assert end == datetime(2026, 3, 29, 5, 0, tzinfo=UTC)
    # And the night they go back (25 October 2026): 07:00 local is 06:00 UTC.
    end = window_end(s, e, berlin, datetime(2026, 10, 24, 23, 0, tzinfo=berlin))
    assert end == datetime(2026, 10, 25, 6, 0, tzinfo=UTC)
    assert window_end(time(9), time(17), ZoneInfo("America/New_York"),
                      datetime(2026, 3, 8, 15, 0, tzinfo=UTC)) == datetime(2026, 3, 8, 21, 0, tzinfo=UTC)


async def test_a_platform_that_is_down_is_retried_later(kith_gateway: GatewayFactory) -> None:
    gw, uid = await _person(kith_gateway)
    Recorder.down = True
    await deliver(gw, user_id=uid, text="Reminder: bins", kind="reminder", origin=None, delivery_id="r1")
    entry = gw.state.outbox.get("r1")
    assert entry.status == "pending" and "platform down" in entry.detail and entry.attempts == 1
    Recorder.down = False
    await sweep_once(gw, now=entry.due_at + timedelta(seconds=1))
    assert Recorder.sent == [("kim", "Reminder: bins")]
    entry = gw.state.outbox.get("r1")
    assert entry.status == "sent" and entry.attempts == 2


async def test_crash_between_send_and_record_costs_at_most_one_duplicate(kith_gateway: GatewayFactory) -> None:
    gw, uid = await _person(kith_gateway)
    outbox = gw.state.outbox
    origin = ConversationAddress(channel="recorder", conversation_id="kim", user_id=uid)
    now = datetime.now(UTC)
    # Two rows as a process left them when it was killed: one claimed and sent but not marked, one
    # claimed and killed before its send.
    for did in ("sent-not-marked", "claimed-not-sent"):
        await deliver(gw, user_id=uid, text=did, kind="reminder", origin=origin, delivery_id="seed-" + did)
    Recorder.sent.clear()
    from gateway.state.delivery import OutboxEntry

    for did in ("sent-not-marked", "claimed-not-sent"):
        outbox.record(OutboxEntry(delivery_id=did, user_id=uid, kind="reminder", text=did, notice=False,
                                  origin="", status="pending", due_at=now, attempts=0, created_at=now, sent_at=None,
                                  channel="", detail=""))  # fmt: skip
        assert outbox.claim(did, now=now, lease_until=now + timedelta(seconds=LEASE_S)) is not None
    await gw.send(origin, Reply(text="sent-not-marked"))  # the killed process's send
    # While the lease runs, nobody else sends them (a slow send is not doubled).
    assert await sweep_once(gw, now=now + timedelta(seconds=LEASE_S / 2)) == 0
    await sweep_once(gw, now=now + timedelta(seconds=LEASE_S + 1))
    await sweep_once(gw, now=now + timedelta(seconds=LEASE_S * 10))
    texts = [t for _, t in Recorder.sent]
    assert texts.count("sent-not-marked") == 2  # the documented bound: one duplicate
    assert texts.count("claimed-not-sent") == 1  # never lost, never doubled
    assert outbox.get("sent-not-marked").status == "sent" and outbox.get("claimed-not-sent").attempts == 2
