"""The PostgreSQL connection pool and the one transaction helper: ``gateway.state.database.Database``.

Synchronous, like the ``State`` Protocol (docs/architecture.md, "Storage"): a statement runs on the
caller's thread on a pooled connection in autocommit mode; ``tx()`` pins one connection to the calling
thread until the block ends, and every call made inside on that thread (a nested ``tx()`` too) runs on
it. A call on another thread meanwhile takes another connection and sees only committed rows.

A ``tx()`` takes a transaction-level advisory lock first, so write transactions run one at a time, as
SQLite's ``BEGIN IMMEDIATE`` makes them: the stores' read-then-write sequences (a counter, a queue
quota, a fact merge) keep their meaning on a server that several kith processes share. Single
statements outside ``tx()`` and reads do not take it (MVCC readers never wait).

Statements are the portable stores' own (placeholders by ``dialect.translate``) with server-side
parameters, which
psycopg prepares after a few runs (half the cost of a turn's statements against literal binding,
measured: docs/benchmarks.md "PostgreSQL state"). Parameters are typed by their Python type
(SQLite takes any value anywhere): the stores pass flags as ``int(...)`` and text as ``str``, and a
``NULL`` whose type nothing around it gives is cast (``CAST(? AS TEXT) IS NULL``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, LiteralString, cast

import psycopg
import psycopg_pool
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus
from psycopg.sql import Composable

from gateway.state.database import Params, Row
from gateway.state.errors import StorageError
from gateway.state.postgres.dialect import translate

# pg_advisory_xact_lock key every write transaction takes ("kith" "tx").
TX_LOCK = 0x6B697468_7478
POOL_MIN = 1
POOL_MAX = 16  # the event loop, the to_thread workers, the knowledge graph's writers
CONNECT_TIMEOUT_S = 10.0


class _IntOrFloat(Loader):
    """``numeric`` results (only ``sum()`` over ``BIGINT`` makes them: the schema has no numeric column)
    as ``int``, or ``float`` with a fraction, as SQLite returns them; never ``Decimal``."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        return float(text) if any(c in text for c in ".eEN") else int(text)


def _configure(conn: psycopg.Connection) -> None:
    conn.adapters.register_loader("numeric", _IntOrFloat)


def _configure_async_commit(conn: psycopg.Connection) -> None:
    """Commits do not wait for their WAL flush (``synchronous_commit=off``): SQLite's
    ``synchronous=NORMAL`` trade. A server crash may lose the last fraction of a second of commits
    (``wal_writer_delay``), never consistency; a commit costs a round trip instead of an fsync (6.8 ->
    2.1 ms per transaction measured here). A URL that sets ``synchronous_commit`` itself
    (``?options=-c%20synchronous_commit%3Don``) keeps its own."""
    _configure(conn)
    conn.execute("SET synchronous_commit = off")


class Result:
    """A finished statement: its rows fetched (the connection is back in the pool), rowcount, columns."""

    __slots__ = ("_rows", "description", "rowcount")

    def __init__(self, cur: psycopg.Cursor[Row]) -> None:
        self.rowcount = cur.rowcount
        self.description = cur.description
        self._rows: list[Row] = cur.fetchall() if cur.description is not None else []

    def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Row]:
        return self._rows

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)


class PgDatabase:
    """A pool, the per-thread transaction, and the statement helpers every store uses."""

    row_id = "ctid"  # the physical row: only ever used to pick rows within one statement

    def __init__(self, url: str, *, max_size: int = POOL_MAX) -> None:
        self.url = url
        own_commit = "synchronous_commit" in url
        self.pool = psycopg_pool.ConnectionPool(
            url, min_size=POOL_MIN, max_size=max_size, open=False,
            configure=_configure if own_commit else _configure_async_commit,
            kwargs={"autocommit": True}, name="kith-state",
        )  # fmt: skip
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self.pool.close()
            raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
        self._local = threading.local()

    def close(self) -> None:
        self.pool.close()

    def in_transaction(self) -> bool:
        """Whether the calling thread is inside ``tx()``."""
        return getattr(self._local, "conn", None) is not None

    def atomic(self) -> AbstractContextManager[None]:
        """A read-then-write made whole against other threads and nodes: here, a transaction."""
        return self.tx()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """The calling thread's transaction connection, or a pooled one for this call."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        try:
            with self.pool.connection() as pooled:
                yield pooled
        except psycopg_pool.PoolTimeout as exc:
            raise StorageError(f"no PostgreSQL connection free: {exc}") from exc

    @contextmanager
    def tx(self) -> Iterator[None]:
        """One transaction, serialised with every other ``tx()``; a nested ``tx()`` joins the outer one."""
        local = self._local
        if getattr(local, "conn", None) is not None:
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        with self.connection() as conn:
            try:
                conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({TX_LOCK})")
            except psycopg.Error as exc:
                _rollback(conn)
                raise StorageError(str(exc)) from exc
            local.conn, local.depth = conn, 1
            try:
                yield
                conn.execute("COMMIT")
            except BaseException as exc:
                _rollback(conn)
                if isinstance(exc, psycopg.Error):
                    raise StorageError(str(exc)) from exc
                raise
            finally:
                local.conn, local.depth = None, 0

    def run(self, sql: str, args: Params = ()) -> Result:
        with self.connection() as conn:
            try:
                return Result(conn.execute(_query(translate(sql)), args))
            except psycopg.Error as exc:
                raise StorageError(str(exc)) from exc

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self.connection() as conn:
            try:
                with conn.cursor() as cur:
                    cur.executemany(_query(translate(sql)), rows)
            except psycopg.Error as exc:
                raise StorageError(str(exc)) from exc

    def one(self, sql: str, args: Params = ()) -> Row | None:
        return self.run(sql, args).fetchone()

    def all(self, sql: str, args: Params = ()) -> list[Row]:
        return self.run(sql, args).fetchall()

    def native(self, sql: str | Composable, args: Params = ()) -> Result:
        """A statement already in PostgreSQL's dialect (``%s`` placeholders): the backend's own SQL."""
        with self.connection() as conn:
            try:
                return Result(conn.execute(_query(sql) if isinstance(sql, str) else sql, args))
            except psycopg.Error as exc:
                raise StorageError(str(exc)) from exc


def _query(sql: str) -> LiteralString:
    """A statement of kith's own (its values are always parameters): psycopg types queries as literal
    strings to keep values out of them, and kith builds some from its own table and column names."""
    return cast(LiteralString, sql)


def _rollback(conn: psycopg.Connection) -> None:
    if conn.info.transaction_status != TransactionStatus.IDLE:
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            pass  # the connection is broken: the pool discards it
