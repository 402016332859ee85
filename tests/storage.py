"""The tests' storage inspector: SQL on the state backend's own connection, for tests that check
what was stored (rows, counts), or put the database in a state no kith method would (an old
watermark, a persona that no longer exists).

The one place outside gateway/state/ where a test may write SQL through the state (the others that
hold SQL check the storage itself; tests/core/test_storage_seam.py lists them and says why). Tests that
only need a value kith can give (a user id, a watermark) ask the state's methods instead.

Works on both backends: the SQL is written with ``?`` placeholders and runs on PostgreSQL with the
backend's placeholder rewrite (write SQL both servers speak, as the stores do: gateway/state/database.py);
rows answer by index and by column name on both.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from gateway.state import State
from gateway.state.sqlite import SqliteState


class PgRow(tuple[Any, ...]):
    """A PostgreSQL row read like ``sqlite3.Row``: by index, by column name, ``keys()``."""

    _names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _pg(state: State) -> Any:
    from gateway.state.postgres import PostgresState

    if not isinstance(state, PostgresState):
        raise TypeError(f"the storage inspector reads SQLite and PostgreSQL states, not {type(state).__name__}")
    return state.database


def select_rows(state: State, sql: str, *args: Any) -> list[Any]:
    """The rows ``sql`` selects (by index or by column name)."""
    if isinstance(state, SqliteState):
        db = state.database
        with db.lock:
            cursor = db.conn.cursor()
            cursor.row_factory = sqlite3.Row
            return cursor.execute(sql, args).fetchall()
    result = _pg(state).run(sql, args)
    names = tuple(d.name for d in result.description or ())
    out = []
    for r in result.fetchall():
        row = PgRow(r)
        row._names = names
        out.append(row)
    return out


def select_one(state: State, sql: str, *args: Any) -> Any | None:
    found = select_rows(state, sql, *args)
    return found[0] if found else None


def count_rows(state: State, sql: str, *args: Any) -> int:
    """The single number a ``SELECT COUNT(*) ...`` returns."""
    row = select_one(state, sql, *args)
    assert row is not None
    return int(row[0])


def write_rows(state: State, sql: str, *args: Any) -> int:
    """Run one statement that changes rows; how many it changed."""
    if isinstance(state, SqliteState):
        db = state.database
        with db.lock:
            return db.conn.execute(sql, args).rowcount
    return int(_pg(state).run(sql, args).rowcount)
