"""The one SQLite connection of a database file, and the one transaction helper.

Statements are short and run on the caller's thread, the event loop's for a turn: with WAL and
``synchronous=NORMAL`` a commit does not fsync, so a turn's writes cost tens of microseconds, cheaper
than a thread hop. Background jobs that run in threads (the knowledge graph's writers, the people
lookup) share the connection; a re-entrant lock makes each statement and each transaction whole.

Nothing here may be awaited inside: ``tx()`` is a plain context manager, so a transaction can never
span an ``await`` in which another task's statements would land in it (tests/core/test_storage_seam.py
checks that no ``await`` sits inside a ``with ... tx()`` block).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from gateway.state.database import Params, Row
from gateway.state.errors import StorageError

BUSY_TIMEOUT_MS = 5000
WAL_ATTEMPTS = 50
WAL_RETRY_S = 0.1


def enable_wal(db: sqlite3.Connection) -> None:
    """Switch a connection's database to WAL. Two processes opening a new database together (the
    daemon and a kith worker) both try it; the loser gets "database is locked" at once, without the
    busy handler, so it waits and tries again.

    Blocking: never call it on the event loop (``open_state_async`` opens in a worker thread)."""
    for attempt in range(WAL_ATTEMPTS):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == WAL_ATTEMPTS - 1:
                raise
            time.sleep(WAL_RETRY_S)


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode with WAL and ``synchronous=NORMAL``. Blocking (see enable_wal).

    Autocommit: transactions are explicit (``BEGIN IMMEDIATE``), so a write never upgrades a read
    lock mid-transaction and hits SQLITE_BUSY when another process shares the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        enable_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


class SqliteDatabase:
    """A connection, its lock, and the statement helpers: ``gateway.state.database.Database`` on SQLite."""

    row_id = "rowid"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.lock = threading.RLock()
        self._depth = 0  # nesting of tx() on the thread holding the lock

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def atomic(self) -> AbstractContextManager[Any]:
        """The connection's lock: no other thread's statement lands between the caller's."""
        return self.lock

    @contextmanager
    def tx(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction; a nested ``tx()`` joins the outer one."""
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(str(exc)) from exc
            self._depth = 1
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException as exc:
                # SQLite rolls back by itself on some errors (disk full, I/O error): a second ROLLBACK
                # would raise "no transaction is active" and hide the real error. A failed COMMIT
                # (SQLITE_FULL) leaves the transaction open: rolled back here, or every later BEGIN fails.
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StorageError(str(exc)) from exc
                raise
            finally:
                self._depth = 0

    def run(self, sql: str, args: Params = ()) -> sqlite3.Cursor:
        with self.lock:
            try:
                return self.conn.execute(sql, args)
            except sqlite3.Error as exc:
                self._recover()
                raise StorageError(str(exc)) from exc

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self.lock:
            try:
                self.conn.executemany(sql, rows)
            except sqlite3.Error as exc:
                self._recover()
                raise StorageError(str(exc)) from exc

    def one(self, sql: str, args: Params = ()) -> Row | None:
        with self.lock:
            try:
                row: Row | None = self.conn.execute(sql, args).fetchone()
                return row
            except sqlite3.Error as exc:
                self._recover()
                raise StorageError(str(exc)) from exc

    def all(self, sql: str, args: Params = ()) -> list[Row]:
        with self.lock:
            try:
                return self.conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                self._recover()
                raise StorageError(str(exc)) from exc

    def _recover(self) -> None:
        """After a failed statement outside ``tx()``: a statement that failed half-way (SQLITE_FULL)
        may leave an implicit transaction open, and then every later BEGIN fails too, long after the
        disk has room again. Inside ``tx()`` the transaction's own handler rolls back."""
        if not self._depth and self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
