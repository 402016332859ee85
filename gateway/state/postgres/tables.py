"""Whole tables of a PostgreSQL state, for ``gateway.state.transfer`` (backup, restore, migrate).

Reads come from one ``REPEATABLE READ READ ONLY`` transaction (every table as of one instant) through
server-side cursors (a big table streams in batches); writes use ``COPY``. After a load the identity
sequences are moved past the copied keys, so the next ``turns.seq`` / ``kg_facts.id`` continues.
Row order is the key order with ``NULLS FIRST``, as SQLite's (``gateway.state.sqlite.tables``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from gateway.state.errors import StorageError
from gateway.state.postgres.database import PgDatabase

SKIPPED = frozenset({"schema_version"})


def table_columns(db: PgDatabase) -> dict[str, list[str]]:
    """Every table of the current schema and its columns, in column order."""
    rows = db.native(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " ORDER BY table_name, ordinal_position"
    ).fetchall()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(str(table), []).append(str(column))
    return out


class _Snapshot:
    def __init__(self, conn: psycopg.Connection, tables: PgTables) -> None:
        self._conn = conn
        self._tables = tables

    def rows(self, table: str, batch: int) -> Iterator[list[tuple[Any, ...]]]:
        cols = self._tables.columns(table)
        query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
            sql.SQL(", ").join(map(sql.Identifier, cols)), sql.Identifier(table),
            sql.SQL(", ").join(sql.SQL("{} NULLS FIRST").format(sql.Identifier(c)) for c in self._tables.key(table)),
        )  # fmt: skip
        try:
            with self._conn.cursor(name=f"kith_dump_{table}") as cur:
                cur.itersize = batch
                cur.execute(query)
                while rows := cur.fetchmany(batch):
                    yield rows
        except psycopg.Error as exc:
            raise StorageError(str(exc)) from exc


class PgTables:
    def __init__(self, db: PgDatabase) -> None:
        self._db = db
        self._columns: dict[str, list[str]] | None = None

    def _schema(self) -> dict[str, list[str]]:
        if self._columns is None:
            self._columns = table_columns(self._db)
        return self._columns

    def names(self) -> list[str]:
        return sorted(t for t in self._schema() if t not in SKIPPED)

    def columns(self, table: str) -> list[str]:
        return self._schema()[table]

    def key(self, table: str) -> list[str]:
        rows = self._db.native(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary"
            " ORDER BY array_position(i.indkey::int2[], a.attnum)",
            (f'"{table}"',),
        ).fetchall()
        return [str(r[0]) for r in rows] or self.columns(table)

    def count(self, table: str) -> int:
        row = self._db.native(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def snapshot(self) -> Iterator[_Snapshot]:
        with self._db.pool.connection() as conn:
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    yield _Snapshot(conn, self)
                finally:
                    conn.execute("ROLLBACK")
            except psycopg.Error as exc:
                raise StorageError(str(exc)) from exc

    def write(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows as they are (keys included), by ``COPY``. One transaction."""
        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        with self._db.tx(), self._db.connection() as conn:
            try:
                with conn.cursor() as cur, cur.copy(copy) as out:
                    for row in rows:
                        out.write_row(row)
            except psycopg.Error as exc:
                raise StorageError(str(exc)) from exc
        return len(rows)

    def clear(self) -> None:
        """Empty every data table and restart the identities (``kith state migrate --force``)."""
        names = self.names()
        if names:
            self._db.native(sql.SQL("TRUNCATE {} RESTART IDENTITY").format(
                sql.SQL(", ").join(map(sql.Identifier, names))))

    def finish_load(self) -> None:
        """Move every identity sequence past the largest key now in its table."""
        rows = self._db.native(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND is_identity = 'YES'"
        ).fetchall()
        for table, column in rows:
            self._db.native(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence({t}, {c}), coalesce(max({ci}), 0) + 1, false) FROM {ti}"
                ).format(t=sql.Literal(f'"{table}"'), c=sql.Literal(column), ci=sql.Identifier(column),
                         ti=sql.Identifier(table))
            )
