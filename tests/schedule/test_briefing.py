"""A scheduled prompt of kind ``briefing``: "every weekday at 8 give me a briefing" in CRONS.json runs the
person's briefing (plugins/briefing.py) at 08:00 in their zone, delivers it once per occurrence, and
records each on the ``briefing`` channel, where the sleep cycle counts it as automated."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from gateway.memory.background.daybook import read_turns
from gateway.schedule import engine
from gateway.schedule.items import CRONS
from tests.schedule.conftest import outbox


async def test_every_weekday_at_8_give_me_a_briefing(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))  # a Monday
    uid = h.user(tz="Europe/Berlin")
    h.write(uid, "TASKS.json", json.dumps({"tasks": [{"id": "t1", "text": "file taxes", "status": "open",
                                                      "due": "2026-06-03"}]}))
    h.write(uid, CRONS, json.dumps({"crons": [{"when": "every weekday at 8", "prompt": "give me a briefing"}]}))
    assert await engine.sync_user(h.gw, uid) == []
    await h.walk(datetime(2026, 6, 8, 0, tzinfo=UTC))
    fired = [when for when, payload in h.fired if payload["kind"] == "prompt"]
    assert fired == [datetime(2026, 6, d, 6, tzinfo=UTC) for d in range(1, 6)]  # 08:00 Berlin (CEST)
    briefings = sorted(outbox(h.gw, uid, "briefing"), key=lambda e: e.delivery_id)
    assert len(briefings) == 5 and not outbox(h.gw, uid, "prompt")  # a briefing, not a turn on the words
    assert briefings[0].text.startswith("Good morning. Your briefing for Monday, 01 June 2026")
    wednesday = briefings[2].text
    assert "Wednesday, 03 June 2026" in wednesday and "file taxes" in wednesday
    rows = read_turns(h.gw.state, scope_key=f"user:{uid}", after_seq=0, before=datetime.now(UTC) + timedelta(3650))
    recorded = [r for r in rows if r.channel == "briefing" and r.role == "assistant"]
    assert sorted(r.content for r in recorded) == sorted(b.text for b in briefings)
    assert json.loads(h.path(uid, CRONS).read_text())["crons"][0]["last_run"] == "2026-06-05T06:00:00Z"

    # A retried job for a delivered occurrence neither delivers nor records a second briefing.
    cron_id = json.loads(h.path(uid, CRONS).read_text())["crons"][0]["id"]
    payload = {"user_id": uid, "kind": "prompt", "item_id": cron_id, "due": "2026-06-05T06:00:00Z"}
    h.clock.set(datetime(2026, 6, 5, 6, 0, 30, tzinfo=UTC))
    assert not await engine.fire(h.gw, payload)
    assert len(outbox(h.gw, uid, "briefing")) == 5


async def test_an_explicit_kind_wins_over_the_words(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, CRONS, json.dumps({"crons": [
        {"when": "every day at 9", "prompt": "what does a good briefing need?", "kind": "prompt"},
        {"when": "every day at 7", "prompt": "morning summary", "kind": "briefing"},
        {"when": "every day at 6", "prompt": "x", "kind": "weather"}]}))
    problems = await engine.sync_user(h.gw, uid)
    assert [(p.line, "unknown kind" in p.message) for p in problems] == [(3, True)]
    await h.walk(datetime(2026, 6, 1, 12, tzinfo=UTC))
    assert len(outbox(h.gw, uid, "briefing")) == 1 and len(outbox(h.gw, uid, "prompt")) == 1
