"""The SQLite backend: one connection per database file, every store on it.

The portable stores (``gateway.state.stores``) on the SQLite driver (``database``), with this
backend's own full text (``transcript``: FTS5), schema catalogue and final erase (``people``), whole
tables (``tables``) and migrations. With ``gateway.state.postgres`` the only place in kith with SQL
text or ``sqlite3`` (tests/core/test_storage_seam.py checks it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path

from gateway.state.sqlite.database import SqliteDatabase, connect
from gateway.state.sqlite.migrations import COMPONENTS, migrate
from gateway.state.sqlite.people import SqlitePeople
from gateway.state.sqlite.tables import SqliteTables
from gateway.state.sqlite.transcript import SqliteTurns
from gateway.state.stores import Stores

__all__ = ["SqliteState", "open_sqlite"]


class SqliteState(Stores):
    """``gateway.state.State`` on one SQLite file."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.path = path
        self.database = SqliteDatabase(conn)
        super().__init__(self.database, turns=SqliteTurns(self.database), people=SqlitePeople(self.database))
        self.tables = SqliteTables(self.database, path)  # whole tables: gateway.state.transfer

    @property
    def db(self) -> sqlite3.Connection:
        """The connection itself: for tests that check storage (a page limit, the VM steps a read costs),
        never part of ``State``."""
        return self.database.conn

    def tx(self) -> AbstractContextManager[None]:
        return self.database.tx()

    def close(self) -> None:
        self.database.close()


def open_sqlite(path: Path, components: Iterable[str] = COMPONENTS) -> SqliteState:
    """Open (creating and migrating as needed) the database at ``path``. Blocking: on the event loop,
    use ``gateway.state.open_state_async``."""
    conn = connect(path)
    try:
        migrate(conn, components)
    except BaseException:
        conn.close()
        raise
    return SqliteState(conn, path)
