"""What a portable store needs of a database driver: the ``Database`` Protocol both drivers implement.

The stores of ``gateway.state.stores`` are written once against this Protocol and run on SQLite
(``gateway.state.sqlite.database``) and PostgreSQL (``gateway.state.postgres.database``). Their SQL is
the subset both servers speak alike:

* placeholders: ``?`` (positional) and ``:name`` (named); a driver whose paramstyle differs rewrites
  them (PostgreSQL's psycopg: ``%s`` / ``%(name)s``, ``gateway.state.postgres.dialect``);
* upsert: ``INSERT ... ON CONFLICT (key) DO UPDATE SET c=excluded.c`` or ``ON CONFLICT DO NOTHING``
  (never SQLite's ``INSERT OR IGNORE`` / ``OR REPLACE``); a scalar maximum is a ``CASE`` (SQLite's
  two-argument ``max(a, b)`` is PostgreSQL's ``GREATEST``);
* returning: ``INSERT/UPDATE/DELETE ... RETURNING``, read with ``all()`` (a statement left unfinished
  by ``one()`` would keep SQLite's write lock);
* transactions: ``tx()`` (one transaction; a nested one joins it) and ``atomic()`` (a read-then-write
  made whole against other threads: SQLite's connection lock, a PostgreSQL transaction);
* ``row_id``: the column naming a row where no key does (``rowid`` / ``ctid``), to pick or order rows
  of one statement only.

What has no common form (full text, the schema catalogue, erasing for good) is a driver's override
of a store (``gateway.state.sqlite`` / ``gateway.state.postgres``). Flags are bound as ``int``, text as
``str`` and a ``NULL`` nothing types is cast (``CAST(? AS TEXT) IS NULL``): PostgreSQL types every
parameter, SQLite takes any value anywhere. Every failure is a ``StorageError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

Row = tuple[Any, ...]
Params = Sequence[Any] | Mapping[str, Any]


class Cursor(Protocol):
    """A statement that ran: its rows, how many rows it changed, its columns' descriptions."""

    @property
    def rowcount(self) -> int: ...
    @property
    def description(self) -> Any: ...  # a sequence of column descriptions (name first), None without rows
    def fetchone(self) -> Any: ...  # Row | None (sqlite3 types it Any)
    def fetchall(self) -> list[Any]: ...  # list[Row]


class Database(Protocol):
    """A driver's connection(s), as every portable store uses them."""

    @property
    def row_id(self) -> str: ...
    def run(self, sql: str, args: Params = ()) -> Cursor: ...
    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...
    def one(self, sql: str, args: Params = ()) -> Row | None: ...
    def all(self, sql: str, args: Params = ()) -> list[Row]: ...
    def tx(self) -> AbstractContextManager[None]: ...
    def atomic(self) -> AbstractContextManager[Any]: ...
    def close(self) -> None: ...


def greater(a: str, b: str) -> str:
    """The larger of two non-null expressions, in SQL both servers speak (SQLite's two-argument
    ``max(a, b)`` is PostgreSQL's ``GREATEST(a, b)``)."""
    return f"CASE WHEN {b} > {a} THEN {b} ELSE {a} END"
