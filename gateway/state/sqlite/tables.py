"""Whole tables of a SQLite state, for ``gateway.state.transfer`` (backup, restore, ``kith state migrate``).

Reads come from a snapshot: a second connection in one read transaction, so every table is read as
of one instant while the daemon goes on writing (WAL readers never block the writer). Rows are in
key order (the primary key, else every column; ``NULLS FIRST`` on both backends), so two backends
holding the same rows give the same sequence and checksum.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.state.errors import StorageError
from gateway.state.sqlite.database import SqliteDatabase, connect

# Not data: bookkeeping each backend keeps for itself (the schema version, AUTOINCREMENT counters).
SKIPPED = frozenset({"schema_version", "sqlite_sequence"})


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _Snapshot:
    def __init__(self, conn: sqlite3.Connection, tables: SqliteTables) -> None:
        self._conn = conn
        self._tables = tables

    def rows(self, table: str, batch: int) -> Iterator[list[tuple[Any, ...]]]:
        cols = self._tables.columns(table)
        order = ", ".join(f"{_quote(c)} NULLS FIRST" for c in self._tables.key(table))
        cur = self._conn.execute(f"SELECT {', '.join(_quote(c) for c in cols)} FROM {_quote(table)} ORDER BY {order}")
        while rows := cur.fetchmany(batch):
            yield rows


class SqliteTables:
    def __init__(self, db: SqliteDatabase, path: Path) -> None:
        self._db = db
        self._path = path

    def names(self) -> list[str]:
        """The data tables (full-text indexes are not: triggers rebuild them from ``turns``)."""
        rows = self._db.all("SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name")
        virtual = {str(n) for n, sql in rows if str(sql or "").upper().startswith("CREATE VIRTUAL TABLE")}
        shadow = {str(n) for n, _ in rows if any(str(n).startswith(v + "_") for v in virtual)}
        return [str(n) for n, _ in rows if n not in SKIPPED and n not in virtual and n not in shadow]

    def columns(self, table: str) -> list[str]:
        return [str(c[1]) for c in self._db.all(f"PRAGMA table_info({_quote(table)})")]

    def key(self, table: str) -> list[str]:
        info = self._db.all(f"PRAGMA table_info({_quote(table)})")
        pk = [str(c[1]) for c in sorted((c for c in info if c[5]), key=lambda c: c[5])]
        return pk or [str(c[1]) for c in info]

    def count(self, table: str) -> int:
        row = self._db.one(f"SELECT count(*) FROM {_quote(table)}")
        return int(row[0]) if row else 0

    @contextmanager
    def snapshot(self) -> Iterator[_Snapshot]:
        try:
            conn = connect(self._path)
        except sqlite3.Error as exc:
            raise StorageError(str(exc)) from exc
        try:
            conn.execute("BEGIN")
            yield _Snapshot(conn, self)
        except sqlite3.Error as exc:
            raise StorageError(str(exc)) from exc
        finally:
            conn.close()

    def write(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows as they are (keys included). One transaction."""
        sql = (f"INSERT INTO {_quote(table)}({', '.join(_quote(c) for c in columns)})"
               f" VALUES ({', '.join('?' for _ in columns)})")  # fmt: skip
        with self._db.tx():
            self._db.many(sql, rows)
        return len(rows)

    def clear(self) -> None:
        """Delete every data table's rows (``kith state migrate --force`` onto a used target)."""
        with self._db.tx():
            for table in self.names():
                self._db.run(f"DELETE FROM {_quote(table)}")

    def finish_load(self) -> None:
        """Nothing: SQLite moves an AUTOINCREMENT counter past an explicit key by itself."""
