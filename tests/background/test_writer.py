"""Memory writer (issue 6): triggers (turns, idle, session end), the slot file merged not forked,
people/ and topics/ files with the aliases index, and a watermark that moves only on success."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gateway.memory.files.aliases import section_aliases
from gateway.memory.files.scopes import user_scope
from tests.background.conftest import BgFactory, say, user_id
from tests.storage import select_one, select_rows

WRITER_OK = """SUMMARY:
Alice is moving to Munich in June and looked at flats near the Isar.

PEOPLE:
[{"slug": "websocket-alice", "name": "Alice", "aliases": ["Ali", "A. Schmidt"],
  "content": "Alice is moving to Munich in June.\\n\\n## Aliases\\n- Ali"}]

TOPICS:
[{"title": "Moving to Munich", "content": "Flat hunting near the Isar; budget 1400 EUR."}]
"""

WRITER_MERGED = """SUMMARY:
Alice is moving to Munich in June. She also signed up for the climbing club.

PEOPLE:
[]

TOPICS:
[]
"""


def files(gw: Any, uid: str) -> dict[str, str]:
    store = gw.memory_store(uid)
    return {e.path: store.read(e.path) for e in store.files() if not e.path.startswith("_history")}


def slot_files(gw: Any, uid: str) -> list[str]:
    return [p for p in files(gw, uid) if p.startswith("sessions/") and p.endswith(".md") and p.count("-") == 3]


async def test_turn_threshold_writes_summary_people_topics_and_aliases(
    bg_gateway: BgFactory, fake_anthropic: Any
) -> None:
    gw = await bg_gateway(background={"writer": {"turn_threshold": 3}})
    await say(gw, "I'm moving to Munich in June.", "Looking at flats near the Isar.")
    assert not slot_files(gw, user_id(gw))
    fake_anthropic.enqueue("reply three")  # the third turn's own reply
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")  # then the writer's call
    await say(gw, "Budget is 1400 EUR.")
    await gw.settle()
    uid = user_id(gw)
    got = files(gw, uid)
    [slot] = slot_files(gw, uid)
    assert "Munich in June" in got[slot] and "through=" in got[slot]
    assert got["people/websocket-alice.md"].startswith("# Alice\n")
    audit = (gw.memory.stores.root_for(user_scope(uid)) / ".audit.jsonl").read_text().splitlines()
    people_audit = [json.loads(x) for x in audit if '"people/websocket-alice.md"' in x]
    assert people_audit[-1]["source"] == "memory_writer" and people_audit[-1]["message_id"].startswith("writer:")
    assert people_audit[-1]["trust"] == "untrusted"
    assert "budget 1400 EUR" in got["topics/moving-to-munich.md"]
    aliases = json.loads(got["people/_aliases.json"])
    assert aliases == {"a. schmidt": "websocket-alice", "ali": "websocket-alice", "alice": "websocket-alice"}
    # Seed 001: every name seen is also under "## Aliases" in the person's file, each once.
    assert sorted(section_aliases(got["people/websocket-alice.md"])) == ["A. Schmidt", "Ali", "Alice"]
    # The writer used the cheap model and saw the turns, not just ids.
    body = fake_anthropic.requests[-1]
    assert body["model"] == gw.config.llm.cheap_model and "Budget is 1400 EUR." in json.dumps(body)
    sid = select_one(gw.state, "SELECT session_id FROM sessions LIMIT 1")[0]
    last = select_one(gw.state, "SELECT max(seq) FROM turns WHERE session_id=?", sid)[0]
    assert gw.state.writer_progress.get(sid) == last
    # Indexed like any memory: the summary is recallable.
    hits = await gw.memory.recall(scope=user_scope(uid), query="flats near the Isar", k=5)
    assert any(h.source == slot for h in hits)


async def test_second_run_in_the_same_slot_merges_into_one_file(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    gw = await bg_gateway(background={"writer": {"turn_threshold": 1}})
    fake_anthropic.enqueue("ok")
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")
    await say(gw, "I'm moving to Munich in June.")
    await gw.settle()
    fake_anthropic.enqueue("ok")
    fake_anthropic.enqueue(WRITER_MERGED, kind="memory_writer")
    await say(gw, "I joined the climbing club.")
    await gw.settle()
    uid = user_id(gw)
    [slot] = slot_files(gw, uid)  # merged, not forked into a -2 sibling
    text = files(gw, uid)[slot]
    assert "climbing club" in text and text.count("<!-- kith:writer session=") == 1
    # The second call received the first summary to merge into, and only the new turn.
    prompt = fake_anthropic.requests[-1]["messages"][0]["content"]
    assert "flats near the Isar" in prompt and "climbing club" in prompt and "I'm moving to Munich" not in prompt


async def test_idle_timeout_triggers_a_run(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    gw = await bg_gateway(background={"writer": {"idle_seconds": 1}})
    await say(gw, "Remind me: the boat is at pier 17.")
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")
    for _ in range(100):
        await asyncio.sleep(0.05)
        if slot_files(gw, user_id(gw)):
            break
    await gw.settle()
    assert slot_files(gw, user_id(gw))


async def test_a_turn_queues_no_idle_check_while_one_is_due_and_the_first_passes_it_on(
    bg_gateway: BgFactory, fake_anthropic: Any
) -> None:
    gw = await bg_gateway(background={"writer": {"idle_seconds": 1}})
    await say(gw, "Remind me: the boat is at pier 17.", "And the keys are with Bo.")
    delayed = [d.decode() if isinstance(d, bytes) else d for d in await gw.bus.redis.zrange(gw.bus.keys.delayed, 0, -1)]
    assert len([d for d in delayed if d.startswith("writer-idle:")]) == 1  # the second turn's check: not queued
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")
    for _ in range(100):  # the first check finds the session went on and queues the second turn's
        await asyncio.sleep(0.05)
        if slot_files(gw, user_id(gw)):
            break
    await gw.settle()
    assert slot_files(gw, user_id(gw))
    session = str(select_one(gw.state, "SELECT session_id FROM sessions")[0])
    last = select_one(gw.state, "SELECT max(seq) FROM turns WHERE session_id=?", session)[0]
    assert gw.state.writer_progress.get(session) == last


async def test_session_end_triggers_a_run_and_a_superseded_idle_check_does_nothing(
    bg_gateway: BgFactory, fake_anthropic: Any
) -> None:
    gw = await bg_gateway(background={"writer": {"idle_seconds": 1}})
    await say(gw, "First session, first turn.", "First session, second turn.")
    await say(gw, "/new")  # ends the session; the next turn starts the new one and queues the old
    # The queued writer and the turn's own reply race for the fake model: both get a valid answer.
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")
    await say(gw, "Second session.")
    # for the second session's idle check, a second from now
    fake_anthropic.enqueue(WRITER_MERGED, kind="memory_writer")
    await asyncio.sleep(1.2)  # the first session's idle checks fire too: superseded, or nothing left to do
    for _ in range(60):
        await gw.settle()
        if gw.state.writer_progress.get(_session(gw, 1)):
            break
        await asyncio.sleep(0.05)
    first, second = _session(gw, 0), _session(gw, 1)
    assert gw.state.writer_progress.get(first) == _last_seq(gw, first)
    assert gw.state.writer_progress.get(second) == _last_seq(gw, second)
    writer_calls = [r for r in fake_anthropic.requests if r["model"] == gw.config.llm.cheap_model]
    assert len(writer_calls) == 2  # one per session: the first turn's idle check was superseded


def _session(gw: Any, index: int) -> str:
    rows = select_rows(gw.state, "SELECT session_id FROM sessions ORDER BY started_at")
    return str(rows[index][0])


def _last_seq(gw: Any, sid: str) -> int:
    return int(select_one(gw.state, "SELECT max(seq) FROM turns WHERE session_id=?", sid)[0])
