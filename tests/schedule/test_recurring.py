"""A recurring reminder across a month fires the right number of times; a restart (re-sync) does not
fire again what was fired; cancelling stops it; after downtime only the latest missed occurrence fires."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.schedule import engine
from gateway.schedule.items import REMINDERS
from tests.schedule.conftest import outbox


async def test_every_weekday_across_december_fires_23_times(harness) -> None:  # type: ignore[no-untyped-def]
    start = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)  # Tuesday 1 December 2026 starts in an hour (UTC)
    h = await harness(start)
    uid = h.user(tz="America/New_York")
    h.write(uid, REMINDERS, "# Reminders\n\n- [ ] every weekday at 8: stand-up notes\n")
    await engine.sync_user(h.gw, uid)
    fired = await h.walk(datetime(2026, 12, 15, 12, tzinfo=UTC))
    await engine.sync_user(h.gw, uid)  # a restart half-way re-arms; nothing fires twice
    fired += await h.walk(datetime(2027, 1, 1, 5, tzinfo=UTC))  # 1 January 00:00 New York
    assert len(fired) == 23  # December 2026 has 23 weekdays
    assert all(t.astimezone(engine.zone("America/New_York")).hour == 8 for t in fired)
    assert len(outbox(h.gw, uid, "reminder")) == 23


async def test_a_cancelled_recurring_reminder_stops(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="Europe/Berlin")
    h.write(uid, REMINDERS, "- [ ] every day at 9: water the plants\n")
    await engine.sync_user(h.gw, uid)
    assert len(await h.walk(datetime(2026, 6, 3, 12, tzinfo=UTC))) == 3
    h.write(uid, REMINDERS, h.path(uid, REMINDERS).read_text().replace("- [ ]", "- [-]"))
    await engine.sync_user(h.gw, uid)
    assert await h.walk(datetime(2026, 6, 10, tzinfo=UTC)) == []


async def test_after_downtime_the_latest_missed_occurrence_fires_once(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, REMINDERS, "- [ ] every day at 09:00: pills\n")
    await engine.sync_user(h.gw, uid)
    (job,) = h.timer.armed.values()
    h.timer.armed.clear()
    h.clock.set(datetime(2026, 6, 5, 12, tzinfo=UTC))  # down for four days; the old job runs late
    assert await engine.fire(h.gw, job[1])
    assert await engine.fire(h.gw, job[1]) is False  # the same job again: already recorded
    await engine.flush(h.gw)
    assert await engine.fire(h.gw, job[1]) is False  # and once it is in the file
    (entry,) = outbox(h.gw, uid, "reminder")
    assert entry.delivery_id.endswith("2026-06-05T09:00:00Z")
    (nxt,) = h.timer.armed.values()
    assert nxt[0] == datetime(2026, 6, 6, 9, tzinfo=UTC)
