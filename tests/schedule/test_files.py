"""Hand edits: a line added by hand is scheduled (and given its id), an invalid line or entry is
reported to the person once per distinct problem and left as it is; scheduled prompts (CRONS.json)
run as a turn on the ``scheduled`` conversation; a task's due date alerts once."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from gateway.schedule import engine
from gateway.schedule.items import CRONS, REMINDERS, TASKS
from tests.schedule.conftest import outbox

BAD = "- [ ] sometime soon call mum"


async def test_an_invalid_line_is_reported_once_and_kept(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="Europe/Berlin")
    h.write(uid, REMINDERS, f"# Reminders\n\n- [ ] 2026-06-02 10:00 dentist\n{BAD}\n")
    problems = await engine.sync_user(h.gw, uid)
    assert [p.line for p in problems] == [4]
    text = h.path(uid, REMINDERS).read_text()
    assert BAD in text  # kept exactly
    assert "dentist <!-- reminder id=r" in text  # the valid hand line got its id
    (report,) = outbox(h.gw, uid, "schedule_problem")
    assert "REMINDERS.md line 4" in report.text and "sometime soon call mum" in report.text
    await engine.sync_user(h.gw, uid)  # read again: the same problem is not reported again
    assert len(outbox(h.gw, uid, "schedule_problem")) == 1
    h.write(uid, REMINDERS, h.path(uid, REMINDERS).read_text() + "- [ ] 2026-13-45 10:00 nonsense date\n")
    await engine.sync_user(h.gw, uid)
    reports = outbox(h.gw, uid, "schedule_problem")
    assert len(reports) == 2 and "line 5" in reports[0].text and "line 4" not in reports[0].text
    assert await h.walk(datetime(2026, 6, 3, tzinfo=UTC)) == [datetime(2026, 6, 2, 8, tzinfo=UTC)]


async def test_invalid_json_entries_are_reported_and_the_rest_run(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, CRONS, json.dumps({"crons": [{"when": "every day at 7", "prompt": "say good morning"},
                                              {"when": "whenever", "prompt": "never"}]}))
    h.write(uid, TASKS, "{not json")
    problems = await engine.sync_user(h.gw, uid)
    assert {(p.file, p.line) for p in problems} == {(CRONS, 2), (TASKS, 0)}
    crons = json.loads(h.path(uid, CRONS).read_text())["crons"]
    assert crons[0]["id"].startswith("c") and "FREQ=DAILY" in crons[0]["rule"]
    assert crons[1] == {"when": "whenever", "prompt": "never"}  # kept as written
    assert h.path(uid, TASKS).read_text() == "{not json"
    (report,) = outbox(h.gw, uid, "schedule_problem")
    assert "CRONS.json entry 2" in report.text and "TASKS.json" in report.text


async def test_a_scheduled_prompt_runs_as_a_turn_and_its_answer_is_delivered(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))  # a Monday
    uid = h.user(tz="Europe/Berlin")
    h.write(uid, CRONS, json.dumps({"crons": [{"when": "every weekday at 8", "prompt": "ask me about my plans"}]}))
    await engine.sync_user(h.gw, uid)
    fired = await h.walk(datetime(2026, 6, 8, 0, tzinfo=UTC))
    assert len(fired) == 5 and fired[0] == datetime(2026, 6, 1, 6, tzinfo=UTC)
    answers = outbox(h.gw, uid, "prompt")
    assert len(answers) == 5 and all("ask me about my plans" in a.text for a in answers)  # the echo model
    assert h.gw.identities.lookup(engine.SCHEDULED_CHANNEL, uid) == uid  # a turn of the person
    assert json.loads(h.path(uid, CRONS).read_text())["crons"][0]["last_run"] == "2026-06-05T06:00:00Z"


async def test_a_task_due_date_alerts_once(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="America/New_York")
    h.write(uid, TASKS, json.dumps({"tasks": [
        {"id": "t1", "text": "file taxes", "status": "open", "due": "2026-06-02"},
        {"id": "t2", "text": "done already", "status": "done", "due": "2026-06-02"},
        {"id": "t3", "text": "call the bank", "status": "open", "due": "2026-06-03T17:00"}]}))
    await engine.sync_user(h.gw, uid)
    fired = await h.walk(datetime(2026, 6, 10, tzinfo=UTC))
    assert fired == [datetime(2026, 6, 2, 13, tzinfo=UTC), datetime(2026, 6, 3, 21, tzinfo=UTC)]
    await engine.sync_user(h.gw, uid)
    assert await h.walk(datetime(2026, 6, 20, tzinfo=UTC)) == []
    alerts = outbox(h.gw, uid, "task")
    assert sorted(a.text for a in alerts) == ["Task due: call the bank (due 2026-06-03T17:00)",
                                              "Task due: file taxes (due 2026-06-02)"]


async def test_a_hand_edit_is_picked_up_by_the_watcher(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    path = h.path(uid, REMINDERS)
    path.parent.mkdir(parents=True, exist_ok=True)
    from plugins.schedule import WATCHER

    watcher = h.gw.stash.get(WATCHER)
    assert watcher is not None and await watcher.wait_ready()
    path.write_text(f"- [ ] 2026-06-01 12:00 lunch\n{BAD}\n")  # an editor, not kith
    for _ in range(200):  # the watcher debounces, then syncs: poll for its effect, ten seconds at most
        if "<!-- reminder id=" in path.read_text() and outbox(h.gw, uid, "schedule_problem"):
            break
        await asyncio.sleep(0.05)
    assert any(due == datetime(2026, 6, 1, 12, tzinfo=UTC) for due, _ in h.timer.armed.values())


async def test_forget_undo_puts_a_reminder_back_and_it_is_armed(harness) -> None:  # type: ignore[no-untyped-def]
    from gateway.testing import message

    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, REMINDERS, "# Reminders\n\n- [ ] 2026-06-02 10:00 ring the plumber\n")
    reply = await h.gw.handle_inbound(message("/forget plumber"))
    assert reply is not None
    if "confirm" in reply.text.lower():
        await h.gw.handle_inbound(message("/forget confirm"))
    assert "plumber" not in h.path(uid, REMINDERS).read_text()
    h.timer.armed.clear()
    await h.gw.handle_inbound(message("/forget undo"))
    assert "plumber" in h.path(uid, REMINDERS).read_text()
    assert [d for d, _ in h.timer.armed.values()] == [datetime(2026, 6, 2, 10, tzinfo=UTC)]
