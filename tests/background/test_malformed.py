"""Acceptance 1 (issue 6): malformed model output degrades gracefully. Bad JSON, missing sections,
truncated text and a 10x answer never corrupt a file or the graph; the problem is logged; an unusable
answer fails the job, which the bus retries and then dead-letters, having written nothing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.memory.files.scopes import user_scope
from tests.background.conftest import BgFactory, say
from tests.background.nights import EXTRACTION, bullets, read, run_night, slot_now, snapshot
from tests.storage import select_one

GOOD_MEMORY = "- Alice is moving from Berlin to Munich in June."
OVERSIZE = EXTRACTION + "".join(f"- filler memory line number {i} " + "x" * 60 + "\n" for i in range(900))
assert len(OVERSIZE) > 10 * len(EXTRACTION) * 5  # well past ten times a night's answer and the 64k cap

CASES = {
    # name: (model answer, expected memory bullets, expected facts, job dead-lettered)
    "bad_json": ("MEMORIES:\n" + GOOD_MEMORY + "\nFACTS:\n"
                 '[{"subject": "user", "predicate": "lives_in", "object": "Berlin"}, {"subject": oops]\n'
                 "TOPICS:\n{not json", [GOOD_MEMORY], {"Berlin"}, False),
    "missing_sections": ("Here is a nice summary of the day: Alice talked about moving.", [], set(), True),
    "truncated": ("MEMORIES:\n" + GOOD_MEMORY + "\nFACTS:\n"
                  '[{"subject": "user", "predicate": "lives_in", "object": "Berl', [GOOD_MEMORY], set(), False),
    "ten_times_too_long": (OVERSIZE, [], set(), True),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
async def test_sleep_cycle_survives_malformed_extraction(
    case: str, bg_gateway: BgFactory, fake_anthropic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    answer, memories, facts, dead = CASES[case]
    gw = await bg_gateway(background={"sleep": {"curate": False}})
    uid = await say(gw, "We're moving from Berlin to Munich in June!")
    gw.memory_store(uid).write("USER.md", "# Alice\n\n## Identity\n- Lives in Berlin.\n", source="test")
    await gw.settle()  # the session log is flushed before the night
    before = snapshot(gw, uid)
    slot, at = slot_now()
    for _ in range(4):
        fake_anthropic.enqueue(answer, kind="extraction")
    caplog.set_level(logging.WARNING)
    job_id = await run_night(gw, uid, slot, at)

    day = datetime.now(UTC).date().isoformat()
    assert bullets(read(gw, uid, f"memories/{day}.md")) == memories
    assert {f.object for f in gw.kg.all(uid)} == facts
    assert read(gw, uid, "USER.md") == before["USER.md"]
    dead_ids = [d.job_id for d in await gw.bus.dead()]
    run = gw.state.sleep_runs.get(user_scope(uid), slot)
    if dead:
        assert job_id in dead_ids and run is None  # retried, then dead-lettered; nothing stored
        assert snapshot(gw, uid) == before
        assert gw.state.sleep_runs.last_seq(user_scope(uid)) == 0
        assert any("dead-lettered" in r.getMessage() for r in caplog.records)
    else:
        assert job_id not in dead_ids and run is not None and run.stage == "done"
        assert any("extraction problems" in r.getMessage() for r in caplog.records)


WRITER_CASES = {
    "no_summary": ("PEOPLE:\n[]\nTOPICS:\n[]", True),
    "ten_times_too_long": ("SUMMARY:\n" + "Alice talked. " * 6000, True),
    "bad_people_json": ('SUMMARY:\nAlice is moving to Munich.\nPEOPLE:\n[{"slug": "../../etc", "content": "x"}, '
                        '{"slug": "websocket-alice", "content": "Alice moves."\nTOPICS:\n[]', False),
}  # fmt: skip


@pytest.mark.parametrize("case", list(WRITER_CASES))
async def test_memory_writer_survives_malformed_output(
    case: str, bg_gateway: BgFactory, fake_anthropic: Any, caplog: pytest.LogCaptureFixture
) -> None:
    answer, dead = WRITER_CASES[case]
    gw = await bg_gateway()
    uid = await say(gw, "I'm moving to Munich in June.")
    await gw.settle()
    before = snapshot(gw, uid)
    sid = select_one(gw.state, "SELECT session_id FROM sessions")[0]
    for _ in range(5):
        fake_anthropic.enqueue(answer, kind="memory_writer")
    caplog.set_level(logging.WARNING)
    await gw.bus.enqueue("memory_writer", {"session_id": sid, "reason": "test"}, job_id=f"writer-test:{sid}")
    await gw.settle()
    after = snapshot(gw, uid)
    if dead:
        assert after == before and gw.state.writer_progress.get(sid) == 0
        assert "writer-test:" + sid in [d.job_id for d in await gw.bus.dead()]
    else:
        new = sorted(set(after) - set(before))
        assert [p for p in new if p.startswith("sessions/")] and not [p for p in new if p.startswith("people/")]
        assert gw.state.writer_progress.get(sid) > 0
    assert any("memory writer output" in r.getMessage() or "dead-lettered" in r.getMessage() for r in caplog.records)


async def test_unusable_curation_output_leaves_the_profile_alone(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    gw = await bg_gateway()
    uid = await say(gw, "We're moving from Berlin to Munich in June!")
    profile = "# Alice\r\n\r\n## Identity\r\n- Lives in Berlin.   \r\n"  # CRLF and trailing spaces: kept byte for byte
    gw.memory_store(uid).write("USER.md", profile, source="test")
    slot, at = slot_now()
    fake_anthropic.enqueue(EXTRACTION, kind="extraction")
    fake_anthropic.enqueue('{"ops": [{"op": "explode"}, "delete everything", {"op": "remove"', kind="curation")
    await run_night(gw, uid, slot, at)
    assert read(gw, uid, "USER.md") == profile
    run = gw.state.sleep_runs.get(user_scope(uid), slot)
    assert run is not None and run.stage == "done"  # the night's memories and facts stand
