"""Versioned migrations: a data directory made before them upgrades in place and keeps its rows;
a newer database is refused; a failing step changes nothing; a knowledge-graph file migrates alone.

``state_before_migrations.sql`` is a database made by the code before gateway/state/ existed (its
header says how): restored as it was, it is what an existing installation brings to this version.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.state import SchemaError, open_state
from gateway.state.sqlite import migrations
from gateway.types import InboundMessage
from tests.conftest import make_config

DUMP = Path(__file__).with_name("state_before_migrations.sql")
ALICE, BOB = "u56e88c5f3eab", "u284d35c4e1c7"
ALICE_SESSION = "b0d49fae0abd46f68ed8b582f14ea4a9"
NOW = datetime(2027, 1, 1, tzinfo=UTC)  # after everything in the dump; before its invites and codes expire


def restore(path: Path) -> dict[str, int]:
    """Restore the old database at ``path``; its row count per table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript(DUMP.read_text(encoding="utf-8"))
        db.execute("PRAGMA journal_mode=WAL")  # as the old code left it
        return table_rows(db)


def table_rows(db: sqlite3.Connection) -> dict[str, int]:
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {name: db.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0] for name in names}


def test_a_data_dir_made_before_migrations_opens_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "data" / "state.sqlite"
    before = restore(path)
    assert before["link_codes"] == 1 and before["turns"] == 6 and "schema_version" not in before

    state = open_state(path)
    try:
        # Every row is still there, as the named methods read it.
        assert state.users.get(ALICE) is not None and state.users.get(ALICE).display_name == "Alice"  # type: ignore[union-attr]
        assert state.users.get(ALICE).timezone == "Europe/Berlin"  # type: ignore[union-attr]
        assert state.identities.lookup("websocket", "bob") == BOB
        assert state.identities.accounts(ALICE) == [("websocket", "alice")]
        session = state.sessions.open_in(f"user:{ALICE}")
        assert session is not None and session.session_id == ALICE_SESSION and session.persona == "kith"
        history = state.turns.history(ALICE_SESSION, 10)
        assert [h.role for h in history] == ["user", "assistant", "user", "assistant"]
        assert history[2].content == "I live in Berlin"
        assert state.turns.last_seq() == 6
        compaction = state.compactions.get(ALICE_SESSION)
        assert compaction is not None and (compaction.upto_seq, compaction.summary) == (2, "they said hello")
        conversation = state.conversations.get("websocket:bob")
        assert conversation is not None and (conversation.kind, conversation.user_id) == ("dm", BOB)
        assert state.dedupe.seen("websocket", "m2") and not state.dedupe.seen("websocket", "m3")
        (link,) = state.links.of_account("websocket", "alice")
        assert (link.code, link.issuer_user, link.redeemer_account) == ("FBHGSSAY", ALICE, None)
        assert [f.object for f in state.knowledge.all(ALICE)] == ["Berlin", "tea"]
        (pairing,) = state.access.pending(NOW)
        assert (pairing.code, pairing.account_id, pairing.requests) == ("V9HENGPK", "stranger", 1)
        assert state.access.is_approved("telegram", "friend")
        assert [i.note for i in state.access.invites(NOW)] == ["for carol"]
        assert state.writer_progress.get(ALICE_SESSION) == 2
        run = state.sleep_runs.get(f"user:{ALICE}", "2026-03-01T03:00")
        assert run is not None and (run.stage, run.upto_seq) == ("extracted", 4)
        assert [r["status"] for r in state.distill_runs.status(ALICE)] == ["written"]
        assert state.retention.get(f"user:{ALICE}") == datetime(2026, 1, 1, tzinfo=UTC)
        assert state.watermarks.get("probe") == 3
    finally:
        state.close()

    with sqlite3.connect(path) as db:
        after = table_rows(db)
        versions = dict(db.execute("SELECT component, version FROM schema_version").fetchall())
    # The unused link_codes table and the graph's old version table went; every other table kept its rows,
    # and tables added by later steps start empty, but for the transcript's full-text index, which the
    # step builds from the kept turns (so a restored transcript is searchable at once).
    assert {k: v for k, v in before.items() if k not in ("link_codes", "kg_meta")} == {
        k: v for k, v in after.items() if k != "schema_version" and k in before}
    assert all(v == 0 for k, v in after.items()
               if k not in before and k != "schema_version" and not k.startswith("turns_fts"))
    assert after["turns_fts"] == before["turns"]
    assert versions == {c: migrations.latest(c) for c in migrations.COMPONENTS}


async def test_a_gateway_starts_on_an_old_data_dir_and_goes_on_with_its_users(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    restore(Path(cfg.data_dir) / "state.sqlite")
    async with Gateway(cfg, entry_points=False, serve_http=False, supervise=False) as gw:
        message = InboundMessage(channel="websocket", account_id="alice", conversation_id="alice", text="back again",
                                 trusted=True, message_id="m9")  # fmt: skip
        reply = await gw.handle_inbound(message)
        assert reply is not None
        assert gw.identities.lookup("websocket", "alice") == ALICE  # the same person, not a new user
        assert gw.state.turns.last_seq() == 8
        assert gw.kg is not None and len(gw.kg.all(ALICE)) == 2


def test_opening_twice_applies_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    open_state(path).close()
    with sqlite3.connect(path) as db:
        stamps = db.execute("SELECT component, updated_at FROM schema_version ORDER BY component").fetchall()
    open_state(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT component, updated_at FROM schema_version ORDER BY component").fetchall() == stamps


def test_processes_opening_a_fresh_database_together_all_succeed(tmp_path: Path) -> None:
    """The race of two processes switching a new file to WAL and migrating it (separate connections
    lock like separate processes)."""
    def opener(path: Path, start: threading.Barrier, errors: list[BaseException]) -> None:
        try:
            start.wait()
            open_state(path).close()
        except BaseException as exc:  # reported below: a thread cannot fail the test
            errors.append(exc)

    for round_ in range(5):
        path = tmp_path / f"race{round_}.sqlite"
        start = threading.Barrier(4)
        errors: list[BaseException] = []
        threads = [threading.Thread(target=opener, args=(path, start, errors)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert db.execute("SELECT COUNT(*) FROM schema_version").fetchone() == (len(migrations.COMPONENTS),)


def test_a_database_from_a_newer_kith_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    open_state(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schema_version SET version=99 WHERE component='state'")
    with pytest.raises(SchemaError, match=r"state schema version 99, this kith knows up to \d+: .*newer kith"):
        open_state(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM schema_version WHERE component='state'").fetchone() == (99,)


def test_a_failing_step_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.sqlite"
    open_state(path).close()
    broken = migrations.Migration("a step that fails half-way",
                                  ("CREATE TABLE half_done (x INTEGER)", "INSERT INTO no_such_table VALUES (1)"))
    monkeypatch.setitem(migrations.MIGRATIONS, "state", (*migrations.MIGRATIONS["state"], broken))
    with pytest.raises(SchemaError, match="nothing was changed: no such table: no_such_table"):
        open_state(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name='half_done'").fetchone() is None
        assert db.execute("SELECT version FROM schema_version WHERE component='state'").fetchone() == (
            len(migrations.MIGRATIONS["state"]) - 1,)


def test_a_knowledge_graph_file_migrates_only_its_own_tables(tmp_path: Path) -> None:
    path = tmp_path / "kg.sqlite"
    open_state(path, components=("knowledge",)).close()
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")} - {"sqlite_sequence"}
        assert tables == {"kg_facts", "schema_version"}
