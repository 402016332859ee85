"""The SQLite backend: one connection per database file, every store on it.

The only place in kith with SQL text or ``sqlite3`` (tests/core/test_storage_seam.py checks it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path

from gateway.state.sqlite.access import SqliteAccess
from gateway.state.sqlite.apikeys import SqliteApiKeys
from gateway.state.sqlite.database import Database, connect
from gateway.state.sqlite.knowledge import SqliteKnowledge
from gateway.state.sqlite.links import SqliteLinkRequests
from gateway.state.sqlite.migrations import COMPONENTS, migrate
from gateway.state.sqlite.outbox import SqliteOutbox
from gateway.state.sqlite.people import SqlitePeople
from gateway.state.sqlite.personas import SqlitePersonaChoices
from gateway.state.sqlite.progress import SqliteProgress
from gateway.state.sqlite.sessions import SqliteConversations, SqliteDedupe, SqliteSessions
from gateway.state.sqlite.tables import SqliteTables
from gateway.state.sqlite.transcript import SqliteCompactions, SqliteTurnContexts, SqliteTurns
from gateway.state.sqlite.usage import SqliteUsage
from gateway.state.sqlite.users import SqliteIdentities, SqliteUsers
from gateway.state.sqlite.websessions import SqliteWebSessions

__all__ = ["SqliteState", "open_sqlite"]


class SqliteState:
    """``gateway.state.State`` on one SQLite file."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.path = path
        self.database = Database(conn)
        self.users = SqliteUsers(self.database)
        self.identities = SqliteIdentities(self.database)
        self.links = SqliteLinkRequests(self.database)
        self.sessions = SqliteSessions(self.database)
        self.turns = SqliteTurns(self.database)
        self.compactions = SqliteCompactions(self.database)
        self.conversations = SqliteConversations(self.database)
        self.dedupe = SqliteDedupe(self.database)
        self.access = SqliteAccess(self.database)
        self.knowledge = SqliteKnowledge(self.database)
        self.progress = SqliteProgress(self.database)
        self.people = SqlitePeople(self.database)
        self.turn_contexts = SqliteTurnContexts(self.database)
        self.persona_choices = SqlitePersonaChoices(self.database)
        self.web_sessions = SqliteWebSessions(self.database)
        self.outbox = SqliteOutbox(self.database)
        self.api_keys = SqliteApiKeys(self.database)
        self.usage = SqliteUsage(self.database)
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
