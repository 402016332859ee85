"""The tests' storage inspector: SQL on the SQLite backend's own connection, for tests that check
what was stored (rows, counts), or put the database in a state no kith method would (an old
watermark, a persona that no longer exists).

The one place outside gateway/state/ where a test may write SQL through the state (the others that
hold SQL check the storage itself; tests/core/test_storage_seam.py lists them and says why). Tests that
only need a value kith can give (a user id, a watermark) ask the state's methods instead.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from gateway.state import State
from gateway.state.sqlite import SqliteState


def _backend(state: State) -> SqliteState:
    if not isinstance(state, SqliteState):
        raise TypeError(f"the storage inspector reads SQLite states, not {type(state).__name__}")
    return state


def select_rows(state: State, sql: str, *args: Any) -> list[sqlite3.Row]:
    """The rows ``sql`` selects (by index or by column name)."""
    db = _backend(state).database
    with db.lock:
        cursor = db.conn.cursor()
        cursor.row_factory = sqlite3.Row
        return cursor.execute(sql, args).fetchall()


def select_one(state: State, sql: str, *args: Any) -> sqlite3.Row | None:
    found = select_rows(state, sql, *args)
    return found[0] if found else None


def count_rows(state: State, sql: str, *args: Any) -> int:
    """The single number a ``SELECT COUNT(*) ...`` returns."""
    row = select_one(state, sql, *args)
    assert row is not None
    return int(row[0])


def write_rows(state: State, sql: str, *args: Any) -> int:
    """Run one statement that changes rows; how many it changed."""
    db = _backend(state).database
    with db.lock:
        return db.conn.execute(sql, args).rowcount
