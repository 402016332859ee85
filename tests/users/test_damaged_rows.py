"""Issue 27, item 2: a transcript row whose stored time is not a timestamp (written by an import before
imports checked their rows, or by hand) no longer breaks what reads it.

It made ``GET /api/users/{uid}/sessions/{sid}/messages`` answer 500, and stopped the session-log
reconciliation of every start, so turns a kill had left out of the Markdown log (and so out of search)
were never written back. Now the reconciliation skips and reports the row and writes the others, and
the message list shows the message with ``at: null``. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import plugins.session_log as session_log
from gateway.app import Gateway
from gateway.config import Config
from gateway.testing import ConfigFactory, message
from tests.api.rig import signed_in
from tests.conftest import make_config
from tests.durability.logs import logged_turns
from tests.signin.rig import daemon, person
from tests.storage import select_rows, write_rows

DAMAGED = "Tuesday-ish"  # sorts after every real time, so the reconciliation's window takes it


def _config(tmp_path: Path, state_url: str | None) -> Config:
    return make_config(tmp_path, state={"url": state_url} if state_url else {})


def _drop_logs(data: Path) -> None:
    """What a kill inside the first batch window leaves: the turns in the transcript, no Markdown log."""
    for log_file in data.glob("users/*/sessions/*.md"):
        log_file.unlink()


def _user_seqs(gw: Gateway) -> list[int]:
    return [int(r[0]) for r in select_rows(gw.state, "SELECT seq FROM turns WHERE role='user' ORDER BY seq")]


async def test_the_reconciliation_skips_a_damaged_row_and_writes_the_others(
    tmp_path: Path, state_url: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = _config(tmp_path, state_url)
    data = Path(cfg.data_dir)
    async with Gateway(cfg, entry_points=False) as gw:
        for text in ("the spare key is under the flowerpot", "my dentist is on Elm Street", "the wifi is heron-42"):
            await gw.handle_inbound(message(text, account="alice"))
        await gw.settle()
        first, damaged, last = _user_seqs(gw)
        assert write_rows(gw.state, "UPDATE turns SET created_at=? WHERE seq=?", DAMAGED, damaged) == 1
        write_rows(gw.state, "DELETE FROM watermarks")
        turn_ids = [r[0] for r in select_rows(gw.state, "SELECT turn_id FROM turns WHERE role='user' ORDER BY seq")]
        damaged_turn = turn_ids[1]
    _drop_logs(data)

    caplog.set_level(logging.ERROR, logger="kith.session_log")
    async with Gateway(cfg, entry_points=False) as gw:
        await gw.settle()
        sl = gw.stash[session_log.SESSION_LOG]
        assert sl.reconciler is not None and sl.reconciler.done() and sl.reconciler.exception() is None
        assert (sl.reconciled, sl.damaged) == (2, 1)
        hits = await gw.memory.recall(scope=f"user:{gw.identities.lookup('websocket', 'alice')}",  # type: ignore[union-attr]
                                      query="what is the wifi password?", k=3)  # fmt: skip
        assert hits and "heron-42" in hits[0].text, "written back, so found again"
    assert set(logged_turns(data)) == set(turn_ids) - {damaged_turn}
    reported = [r.getMessage() for r in caplog.records if "not a timestamp" in r.getMessage()]
    assert len(reported) == 1 and f"{damaged}/{damaged_turn}" in reported[0]
    assert first < damaged < last


async def test_the_message_list_shows_a_damaged_row(kith_config: ConfigFactory, state_url: str | None) -> None:
    overrides: dict[str, Any] = {"state": {"url": state_url}} if state_url else {}
    async with daemon(kith_config(**overrides)) as gw:
        alice = await person(gw, "alice")
        await gw.handle_inbound(message("second message", account="alice"))
        await gw.settle()
        session = gw.state.sessions.open_in(f"user:{alice}")
        assert session is not None
        first = _user_seqs(gw)[0]
        write_rows(gw.state, "UPDATE turns SET created_at=? WHERE seq=?", DAMAGED, first)
        write_rows(gw.state, "UPDATE sessions SET started_at=? WHERE session_id=?", DAMAGED, session.session_id)
        client = await signed_in(gw, alice)
        try:
            status, page = await client.get(f"/api/users/me/sessions/{session.session_id}/messages")
        finally:
            await client.close()
    assert status == 200, page
    assert [(m["role"], m["at"] is None) for m in page["messages"]] == [
        ("user", True), ("assistant", False), ("user", False), ("assistant", False)]
    assert page["messages"][0]["text"] == "hello", "the message is shown, only its time is not"
    assert datetime.fromisoformat(page["messages"][1]["at"]) <= datetime.now(UTC)


async def test_the_session_list_and_its_search_skip_a_damaged_session(
    kith_config: ConfigFactory, state_url: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the list and the search read every session's times strictly, so one damaged row made
    # both answer 500 for the whole list.
    overrides: dict[str, Any] = {"state": {"url": state_url}} if state_url else {}
    caplog.set_level(logging.ERROR, logger="kith.state")
    async with daemon(kith_config(**overrides)) as gw:
        alice = await person(gw, "alice")
        await gw.handle_inbound(message("the flowerpot by the door", account="alice"))
        damaged = gw.state.sessions.open_in(f"user:{alice}")
        await gw.handle_inbound(message("/new", account="alice"))
        await gw.handle_inbound(message("the flowerpot is blue", account="alice"))
        kept = gw.state.sessions.open_in(f"user:{alice}")
        assert damaged is not None and kept is not None and damaged.session_id != kept.session_id
        write_rows(gw.state, "UPDATE sessions SET last_active_at=? WHERE session_id=?", DAMAGED, damaged.session_id)
        client = await signed_in(gw, alice)
        try:
            status, listed = await client.get("/api/users/me/sessions")
            found_status, found = await client.get("/api/users/me/sessions?q=flowerpot")
        finally:
            await client.close()
    assert (status, found_status) == (200, 200), (listed, found)
    assert [s["session_id"] for s in listed["sessions"]] == [kept.session_id]
    assert [s["session_id"] for s in found["sessions"]] == [kept.session_id]
    reported = [r.getMessage() for r in caplog.records if "not a timestamp" in r.getMessage()]
    assert len(reported) == 1 and damaged.session_id in reported[0] and DAMAGED in reported[0], reported


async def test_a_turn_is_answered_when_its_history_holds_a_damaged_row(
    tmp_path: Path, state_url: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the history of the session, read for every turn's prompt, failed on the row, so each
    # later message of that session was answered with an error.
    caplog.set_level(logging.ERROR, logger="kith.state")
    async with Gateway(_config(tmp_path, state_url), entry_points=False) as gw:
        await gw.handle_inbound(message("the spare key is under the flowerpot", account="alice"))
        damaged = _user_seqs(gw)[0]
        write_rows(gw.state, "UPDATE turns SET created_at=? WHERE seq=?", DAMAGED, damaged)
        reply = await gw.handle_inbound(message("and the wifi is heron-42", account="alice"))
        assert reply is not None and not reply.notice, reply
        assert len(_user_seqs(gw)) == 2, "the turn is stored"
    reported = [r.getMessage() for r in caplog.records if "not a timestamp" in r.getMessage()]
    assert reported and "transcript row" in reported[0], reported
