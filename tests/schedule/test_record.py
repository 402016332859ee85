"""Fired occurrences are recorded in batches: one write of a person's file for many fires, applied to
the file as it is at write time (an edit made in between is kept), and known before they are written."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.schedule import engine
from gateway.schedule.items import REMINDERS

LINES = "".join(f"- [ ] 2026-06-01 09:00 (UTC) thing {n}\n" for n in range(10))


async def test_ten_fires_of_one_person_are_one_write_that_keeps_an_edit(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, REMINDERS, "# Reminders\n\n" + LINES)
    await engine.sync_user(h.gw, uid)
    recorder = engine.recorder_of(h.gw)
    recorder.window = 5.0  # every fire below joins one batch, however slow the machine
    before = recorder.writes
    jobs = sorted(h.timer.armed.values(), key=lambda j: j[1]["item_id"])
    h.timer.armed.clear()
    h.clock.set(datetime(2026, 6, 1, 9, 0, 1, tzinfo=UTC))
    for _, payload in jobs:
        assert await engine.fire(h.gw, payload)
    assert "[x]" not in h.path(uid, REMINDERS).read_text()  # not written yet...
    assert not await engine.fire(h.gw, jobs[0][1])  # ...but known: the same occurrence does not fire twice
    h.write(uid, REMINDERS, h.path(uid, REMINDERS).read_text() + "- [ ] 2026-06-02 10:00 (UTC) added meanwhile\n")
    await engine.flush(h.gw)
    text = h.path(uid, REMINDERS).read_text()
    assert recorder.writes - before == 1
    assert text.count("- [x] 2026-06-01 09:00 (UTC) thing") == 10 and text.count("sent=2026-06-01T09:00:01Z") == 10
    assert "- [ ] 2026-06-02 10:00 (UTC) added meanwhile" in text
    assert len([e for e in h.gw.state.outbox.list_for(uid, limit=100) if e.kind == "reminder"]) == 10
