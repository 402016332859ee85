"""``State.people.erase_user`` knows every table: a walk of the migrated schema.

A table either has a ``user_id`` column (erased by it, whatever the table), or a rule in
gateway/state/stores/people.py, or is declared to name nobody. A table added later that holds a
person some other way fails ``test_every_table_is_known``. The fill test puts one row of Alice and
one of Bob into every table that can hold a person, with her marker in every other text column,
erases her, and reads the raw database file: nothing of hers is left, in rows, in the full-text
index, in free pages or in the write-ahead log; Bob's rows are all there.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gateway.state import State, StorageError, open_configured, open_state, ts
from gateway.state.sqlite import SqliteState
from gateway.state.stores.people import NOT_PERSONAL, classify
from tests.storage import select_rows, write_rows


def _state(tmp_path: Path) -> SqliteState:
    state = open_state(tmp_path / "state.sqlite")
    assert isinstance(state, SqliteState)
    return state


def _any(tmp_path: Path, state_url: str | None) -> State:
    """SQLite, or PostgreSQL (tests/pg.py): the schema walk and erase hold on both backends."""
    return open_configured(tmp_path, state_url)


def test_every_table_is_known(tmp_path: Path, state_url: str | None) -> None:
    state: Any = _any(tmp_path, state_url)
    try:
        kinds = classify(state.people.tables(), state.people.fts_tables())
    finally:
        state.close()
    unknown = sorted(t for t, k in kinds.items() if k == "unknown")
    assert unknown == [], (f"tables {unknown} may hold a person but `kith users delete` does not know how: give "
                           "them a user_id column, a rule in gateway/state/stores/people.py, or list them in "
                           "NOT_PERSONAL there")  # fmt: skip
    # The ones that matter are really covered, and nothing personal hides in NOT_PERSONAL.
    for table in ("users", "identities", "sessions", "turns", "kg_facts", "link_requests", "access_approved",
                  "access_pairing", "web_sessions", "web_signin_tokens", "persona_choices", "api_keys",
                  "outbox", "delivery_prefs", "llm_usage"):  # fmt: skip
        assert kinds.get(table) in ("rule", "user_id"), table
    assert not {"users", "turns", "sessions"} & NOT_PERSONAL


def test_a_new_table_holding_a_person_is_caught(tmp_path: Path) -> None:
    state = _state(tmp_path)
    try:
        state.db.execute("CREATE TABLE gadgets (owner TEXT NOT NULL, note TEXT)")
        state.db.execute("CREATE TABLE widgets (user_id TEXT NOT NULL, note TEXT)")
        kinds = classify(state.people.tables(), state.people.fts_tables())
        assert kinds["gadgets"] == "unknown" and kinds["widgets"] == "user_id"
        with pytest.raises(StorageError, match="gadgets"):
            state.people.erase_user("ualice")  # refuses rather than leave rows behind
    finally:
        state.close()


def _value(table: str, column: str, ctype: str, who: dict[str, str]) -> Any:
    if column in ("user_id", "issuer_user", "redeemer_user"):
        return who["uid"]
    if column in ("scope", "scope_key"):
        return f"user:{who['uid']}"
    if column == "session_id":
        return who["sid"]
    if column.endswith("channel"):
        return "telegram"
    if column.endswith("account") or column == "account_id":
        return who["account"]
    if "INT" in ctype.upper() or "REAL" in ctype.upper():
        return 1
    if column.endswith("_at") or column in ("valid_from", "valid_until", "last_cutoff"):
        return ts()
    return f"{who['marker']} {table} {column}"


def _columns(state: Any, table: str) -> list[tuple[str, str, bool]]:
    """(name, declared type, whether the backend picks the value: the row id) of each column."""
    if isinstance(state, SqliteState):
        info = select_rows(state, f'SELECT name, type, pk FROM pragma_table_info("{table}")')
        return [(r[0], str(r[1]), bool(r[2]) and "INT" in str(r[1]).upper() and r[0] in ("seq", "id")) for r in info]
    info = select_rows(state, "SELECT column_name, data_type, is_identity FROM information_schema.columns"
                              " WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
                       table)  # fmt: skip
    return [(r[0], "INTEGER" if "int" in r[1] else "REAL" if "double" in r[1] else "TEXT", r[2] == "YES")
            for r in info]  # fmt: skip


def _fill(state: Any, who: dict[str, str]) -> list[str]:
    """One row of ``who`` in every table that can hold a person; the tables filled."""
    kinds = classify(state.people.tables(), state.people.fts_tables())
    filled = []
    for table, kind in sorted(kinds.items()):
        if kind not in ("rule", "user_id"):
            continue
        cols, vals = [], []
        for name, ctype, auto in _columns(state, table):
            if auto:
                continue  # the row id: the backend picks it
            cols.append(name)
            vals.append(_value(table, name, ctype, who))
        write_rows(state, f'INSERT INTO "{table}"({", ".join(cols)}) VALUES ({", ".join("?" * len(cols))})', *vals)
        filled.append(table)
    return filled


def _rows_with(state: Any, marker: str) -> dict[str, int]:
    out = {}
    for table in state.people.tables():
        rows = select_rows(state, f'SELECT * FROM "{table}"')
        n = sum(1 for r in rows if any(marker in str(v) for v in r))
        if n:
            out[table] = n
    return out


def test_erase_leaves_nothing_of_the_person_in_the_file(tmp_path: Path) -> None:
    alice = {"uid": "ualice0001", "sid": "salice0001", "account": "acct-alice-77", "marker": "ALICEMARKER"}
    bob = {"uid": "ubob000002", "sid": "sbob000002", "account": "acct-bob-88", "marker": "BOBMARKER"}
    state = _state(tmp_path)
    try:
        filled = _fill(state, alice)
        _fill(state, bob)
        assert {"turns", "users", "kg_facts", "web_sessions"} <= set(filled)
        fts = sorted(state.people.fts_tables())
        for table in fts:
            assert state.db.execute(f'SELECT count(*) FROM "{table}" WHERE "{table}" MATCH ?',
                                    ("alicemarker",)).fetchone()[0] > 0  # fmt: skip
        bob_before = _rows_with(state, bob["uid"])

        report = state.people.erase_user(alice["uid"])

        assert {"users", "turns", "identities", "kg_facts"} <= set(report)
        assert _rows_with(state, alice["uid"]) == {}
        assert _rows_with(state, alice["marker"]) == {}
        assert _rows_with(state, alice["account"]) == {}
        assert _rows_with(state, bob["uid"]) == bob_before
        for table in fts:
            assert state.db.execute(f'SELECT count(*) FROM "{table}" WHERE "{table}" MATCH ?',
                                    ("alicemarker",)).fetchone()[0] == 0  # fmt: skip
    finally:
        state.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("state.sqlite")).lower()
    for needle in (alice["uid"], alice["marker"], alice["account"]):
        assert needle.lower().encode() not in raw, needle
    assert bob["marker"].lower().encode() in raw


def test_erase_leaves_no_row_of_the_person(tmp_path: Path, state_url: str | None) -> None:
    """Every table filled, on each backend: after the erase no row names her; Bob's are all there."""
    alice = {"uid": "ualice0001", "sid": "salice0001", "account": "acct-alice-77", "marker": "ALICEMARKER"}
    bob = {"uid": "ubob000002", "sid": "sbob000002", "account": "acct-bob-88", "marker": "BOBMARKER"}
    state: Any = _any(tmp_path, state_url)
    try:
        assert {"turns", "users", "kg_facts", "web_sessions"} <= set(_fill(state, alice))
        _fill(state, bob)
        bob_before = _rows_with(state, bob["uid"])
        assert state.turns.rows_with_words(alice["uid"], alice["marker"]) != []
        state.people.erase_user(alice["uid"])
        for needle in (alice["uid"], alice["marker"], alice["account"]):
            assert _rows_with(state, needle) == {}, needle
        assert state.turns.rows_with_words(alice["uid"], alice["marker"]) == []
        assert _rows_with(state, bob["uid"]) == bob_before
    finally:
        state.close()


def test_a_group_session_she_opened_stays_for_the_others(tmp_path: Path, state_url: str | None) -> None:
    from datetime import UTC, datetime

    from gateway.state import TranscriptEntry

    state = _any(tmp_path, state_url)
    now = datetime.now(UTC)
    try:
        for uid in ("ualice", "ubob"):
            state.users.create(uid, display_name=uid, timezone="UTC")
        state.sessions.create("group1", user_id="ualice", scope_key="conv:telegram:-100", conversation_key="tg:-100",
                              persona="default", at=now)  # fmt: skip
        state.turns.append(*(TranscriptEntry(turn_id=f"t{i}", session_id="group1", user_id=uid, role="user",
                                             content=f"{uid} says hi", channel="telegram", conversation_key="tg:-100",
                                             speaker=uid, created_at=now)
                             for i, uid in enumerate(("ualice", "ubob"))))  # fmt: skip
        state.people.erase_user("ualice")
        session = state.sessions.get("group1")
        assert session is not None and session.user_id == ""
        assert [r.content for r in state.turns.after("group1")] == ["ubob says hi"]
    finally:
        state.close()


def test_rows_and_restore_round_trip(tmp_path: Path, state_url: str | None) -> None:
    alice = {"uid": "ualice0001", "sid": "salice0001", "account": "acct-alice-77", "marker": "ALICEMARKER"}
    state = _any(tmp_path, state_url)
    try:
        _fill(state, alice)
        rows = state.people.rows(alice["uid"])
        state.people.erase_user(alice["uid"])
        assert state.people.rows(alice["uid"]) == {}
        counts = state.people.restore("unew", rows, session_ids={alice["sid"]: alice["sid"]})
        assert counts["users"] == 1 and counts["turns"] == 1
        again = state.people.rows("unew")
        assert again["turns"][0]["content"] == rows["turns"][0]["content"]
        assert state.users.get("unew") is not None
        assert state.writer_progress.get(alice["sid"]) == again["turns"][0]["seq"]
    finally:
        state.close()


def test_storage_error_is_not_sqlite3s() -> None:
    assert not issubclass(StorageError, sqlite3.Error)
