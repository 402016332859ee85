"""DST edges in three zones: a daily reminder at a time the day skips fires once, shifted forward by
the gap; at a time the day repeats it fires once, at the first occurrence. Walked through the real
schedule (REMINDERS.md -> armed occurrence -> schedule_due -> outbox) on a hand-moved clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.schedule.items import REMINDERS
from tests.schedule.conftest import outbox

CASES = [
    # zone, rule, start (UTC), DST day (local), the one instant it fires that day (UTC)
    ("Europe/Berlin", "every day at 02:30", datetime(2026, 3, 27, 12, tzinfo=UTC), "2026-03-29",
     datetime(2026, 3, 29, 1, 30, tzinfo=UTC)),  # gap 02:00-03:00: 03:30 CEST
    ("Europe/Berlin", "every day at 02:30", datetime(2026, 10, 23, 12, tzinfo=UTC), "2026-10-25",
     datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),  # 02:30 twice: the first (CEST)
    ("America/New_York", "every day at 02:30", datetime(2026, 3, 6, 12, tzinfo=UTC), "2026-03-08",
     datetime(2026, 3, 8, 7, 30, tzinfo=UTC)),  # gap 02:00-03:00: 03:30 EDT
    ("America/New_York", "every day at 01:30", datetime(2026, 10, 30, 12, tzinfo=UTC), "2026-11-01",
     datetime(2026, 11, 1, 5, 30, tzinfo=UTC)),  # 01:30 twice: the first (EDT)
    ("Australia/Sydney", "every day at 02:30", datetime(2026, 10, 2, 0, tzinfo=UTC), "2026-10-04",
     datetime(2026, 10, 3, 16, 30, tzinfo=UTC)),  # gap 02:00-03:00: 03:30 AEDT
    ("Australia/Sydney", "every day at 02:30", datetime(2026, 4, 3, 0, tzinfo=UTC), "2026-04-05",
     datetime(2026, 4, 4, 15, 30, tzinfo=UTC)),  # 02:30 twice: the first (AEDT)
]


@pytest.mark.parametrize(("tz", "rule", "start", "day", "expected"), CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in CASES])
async def test_a_daily_reminder_fires_once_on_the_dst_day(harness, tz, rule, start, day, expected) -> None:  # type: ignore[no-untyped-def]
    h = await harness(start)
    uid = h.user(tz=tz)
    h.write(uid, REMINDERS, f"# Reminders\n\n- [ ] {rule}: check the boiler\n")
    from gateway.schedule import engine

    await engine.sync_user(h.gw, uid)
    fired = await h.walk(start + timedelta(days=4))
    from gateway.schedule.zones import zone

    on_day = [t for t in fired if t.astimezone(zone(tz)).date().isoformat() == day]
    assert on_day == [expected]
    assert len(fired) == 4, fired  # one a day, none lost, none doubled
    assert len(set(fired)) == 4
    sent = outbox(h.gw, uid, "reminder")
    assert len(sent) == 4 and all(e.text == "Reminder: check the boiler" for e in sent)
    assert f"last={fired[-1]:%Y-%m-%dT%H:%M:%SZ}" in h.path(uid, REMINDERS).read_text()


async def test_a_one_shot_at_a_skipped_time_means_the_moment_shifted_forward(harness) -> None:  # type: ignore[no-untyped-def]
    start = datetime(2026, 3, 28, 12, tzinfo=UTC)
    h = await harness(start)
    uid = h.user(tz="Europe/Berlin")
    h.write(uid, REMINDERS, "- [ ] 2026-03-29 02:30 gap time\n- [ ] 2026-10-25 02:30 twice time\n")
    from gateway.schedule import engine

    await engine.sync_user(h.gw, uid)
    text = h.path(uid, REMINDERS).read_text()
    assert "due=2026-03-29T01:30:00Z" in text  # 03:30 CEST
    assert "due=2026-10-25T00:30:00Z" in text  # the first 02:30 (CEST)
    fired = await h.walk(datetime(2026, 10, 26, tzinfo=UTC))
    assert fired == [datetime(2026, 3, 29, 1, 30, tzinfo=UTC), datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]
    assert h.path(uid, REMINDERS).read_text().count("- [x]") == 2
