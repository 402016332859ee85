"""Seed 004: a scheduled prompt marked silent (a high-volume retrieve-and-render job) is not indexed:
its turns stay in the transcript but never reach the session log, not even through the start-up
catch-up that copies transcript turns missing from the log."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from gateway.schedule import engine
from gateway.schedule.items import CRONS
from plugins.session_log import SESSION_LOG
from tests.schedule.conftest import outbox


async def test_a_silent_scheduled_prompt_is_answered_but_never_logged_or_indexed(harness) -> None:  # type: ignore[no-untyped-def]
    h = await harness(datetime(2026, 6, 1, 0, tzinfo=UTC))
    uid = h.user(tz="UTC")
    h.write(uid, CRONS, json.dumps({"crons": [
        {"when": "every day at 7", "prompt": "render the zebra feed"},
        {"when": "every day at 8", "prompt": "tell me about the giraffe plans", "silent": False},
        {"when": "every day at 9", "prompt": "render the okapi feed", "silent": True}]}))
    await engine.sync_user(h.gw, uid)
    assert len(await h.walk(datetime(2026, 6, 1, 12, tzinfo=UTC))) == 3
    assert any("okapi" in a.text for a in outbox(h.gw, uid, "prompt"))  # it ran and was delivered
    log = h.gw.stash[SESSION_LOG]
    await log.reconcile(h.gw.state.turns.last_seq())  # the catch-up a restart runs: it must skip it too
    await h.gw.settle()
    store = h.gw.memory_store(uid)
    logged = "".join(store.read(f.path) for f in store.files("sessions"))
    assert "zebra feed" in logged and "giraffe plans" in logged
    assert "okapi" not in logged
    hits = await h.gw.memory.recall(scope=f"user:{uid}", query="okapi feed", k=5)
    assert not any("okapi" in hit.text for hit in hits)
