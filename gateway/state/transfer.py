"""Whole tables in and out of a state, whatever its backend: ``kith backup`` / ``kith restore``
(gateway/ops) and ``kith state migrate`` (SQLite -> PostgreSQL) use these, never SQL.

* ``dump_tables(state)``: every data table as (name, batch of rows as dicts), all read as of one
  instant (a snapshot: the daemon may go on writing);
* ``load_tables(state, batches)``: writes such batches into a state (keys kept, then the
  backend's counters moved past them); rows per table;
* ``table_checksums(state)``: per table, (row count, SHA-256 of its rows in key order), equal on two
  backends that hold the same rows.

Bookkeeping is not data: ``schema_version`` (each backend migrates itself) and SQLite's
``sqlite_sequence`` and full-text tables (rebuilt by triggers from ``turns``) are skipped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from gateway.state.errors import StorageError

BATCH = 2000


class TableSnapshot(Protocol):
    def rows(self, table: str, batch: int) -> Iterator[list[tuple[Any, ...]]]: ...


class TableStore(Protocol):
    """What each backend gives ``state.tables``."""

    def names(self) -> list[str]: ...
    def columns(self, table: str) -> list[str]: ...
    def key(self, table: str) -> list[str]: ...
    def count(self, table: str) -> int: ...
    def snapshot(self) -> AbstractContextManager[TableSnapshot]: ...
    def write(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int: ...
    def finish_load(self) -> None: ...
    def clear(self) -> None: ...


def _tables(state: object) -> TableStore:
    tables: TableStore | None = getattr(state, "tables", None)
    if tables is None:
        raise StorageError(f"{type(state).__name__} cannot list its tables")
    return tables


def dump_tables(state: object, *, batch: int = BATCH) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Every data table of ``state``, as (table name, up to ``batch`` rows), tables by name, rows in key
    order; an empty table yields nothing. One snapshot for the whole dump."""
    tables = _tables(state)
    with tables.snapshot() as snap:
        for table in tables.names():
            cols = tables.columns(table)
            for rows in snap.rows(table, batch):
                yield table, [dict(zip(cols, r, strict=True)) for r in rows]


def load_tables(state: object, batches: Iterable[tuple[str, list[dict[str, Any]]]]) -> dict[str, int]:
    """Insert ``batches`` (from ``dump_tables``) into ``state``, keys as they are; rows written per table.
    A table the target does not have, or a column it lacks, is an error (nothing is guessed). Each
    batch is one transaction; the caller loads into an empty state (``kith state migrate`` checks)."""
    tables = _tables(state)
    known = {t: set(tables.columns(t)) for t in tables.names()}
    counts: dict[str, int] = {}
    for table, rows in batches:
        if not rows:
            continue
        if table not in known:
            raise StorageError(f"the target has no table {table!r}")
        cols = list(rows[0])
        missing = [c for c in cols if c not in known[table]]
        if missing:
            raise StorageError(f"the target's table {table!r} has no columns {missing}")
        counts[table] = counts.get(table, 0) + tables.write(table, cols, [[r[c] for c in cols] for r in rows])
    tables.finish_load()
    return counts


def row_counts(state: object) -> dict[str, int]:
    """Rows per data table (a target is empty when every count is 0)."""
    tables = _tables(state)
    return {t: tables.count(t) for t in tables.names()}


def clear_tables(state: object) -> None:
    """Delete every data row of ``state`` (the schema and its version stay)."""
    _tables(state).clear()


def canonical(row: dict[str, Any]) -> bytes:
    """One row as the checksum reads it: JSON, keys sorted, so column order and backend do not matter."""
    return json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def table_checksums(state: object) -> dict[str, tuple[int, str]]:
    """Per data table (empty ones too): (row count, SHA-256 hex of its canonical rows in key order)."""
    tables = _tables(state)
    out: dict[str, tuple[int, str]] = {}
    with tables.snapshot() as snap:
        for table in tables.names():
            cols = tables.columns(table)
            digest, n = hashlib.sha256(), 0
            for rows in snap.rows(table, BATCH):
                for r in rows:
                    digest.update(canonical(dict(zip(cols, r, strict=True))))
                n += len(rows)
            out[table] = (n, digest.hexdigest())
    return out
