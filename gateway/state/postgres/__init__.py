"""The PostgreSQL backend: a connection pool, every store on it (``state.url: postgresql://...``).

The stores are the SQLite backend's, running their statements through ``dialect.translate``; the few
with SQLite-only SQL (full text, the schema catalogue, erase) are overridden in ``stores``. Migrations
have the same components and steps model as SQLite's (``migrations``). SQL lives here and in
``gateway.state.sqlite`` only (tests/core/test_storage_seam.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager

from gateway.state.postgres import fulltext
from gateway.state.postgres.database import PgDatabase
from gateway.state.postgres.migrations import COMPONENTS, migrate
from gateway.state.postgres.stores import PgKnowledge, PgPeople, PgTurns
from gateway.state.postgres.tables import PgTables
from gateway.state.sqlite.access import SqliteAccess
from gateway.state.sqlite.apikeys import SqliteApiKeys
from gateway.state.sqlite.links import SqliteLinkRequests
from gateway.state.sqlite.outbox import SqliteOutbox
from gateway.state.sqlite.personas import SqlitePersonaChoices
from gateway.state.sqlite.progress import SqliteProgress
from gateway.state.sqlite.sessions import SqliteConversations, SqliteDedupe, SqliteSessions
from gateway.state.sqlite.transcript import SqliteCompactions, SqliteTurnContexts
from gateway.state.sqlite.usage import SqliteUsage
from gateway.state.sqlite.users import SqliteIdentities, SqliteUsers
from gateway.state.sqlite.websessions import SqliteWebSessions

__all__ = ["PostgresState", "open_postgres"]


class PostgresState:
    """``gateway.state.State`` on a PostgreSQL database."""

    def __init__(self, database: PgDatabase) -> None:
        self.url = database.url
        self.database = database
        db = database  # the SQLite stores take any object with run/one/all/many/tx/lock
        self.users = SqliteUsers(db)  # type: ignore[arg-type]
        self.identities = SqliteIdentities(db)  # type: ignore[arg-type]
        self.links = SqliteLinkRequests(db)  # type: ignore[arg-type]
        self.sessions = SqliteSessions(db)  # type: ignore[arg-type]
        self.turns = PgTurns(db)
        self.compactions = SqliteCompactions(db)  # type: ignore[arg-type]
        self.conversations = SqliteConversations(db)  # type: ignore[arg-type]
        self.dedupe = SqliteDedupe(db)  # type: ignore[arg-type]
        self.access = SqliteAccess(db)  # type: ignore[arg-type]
        self.knowledge = PgKnowledge(db)
        self.progress = SqliteProgress(db)  # type: ignore[arg-type]
        self.people = PgPeople(db)
        self.turn_contexts = SqliteTurnContexts(db)  # type: ignore[arg-type]
        self.persona_choices = SqlitePersonaChoices(db)  # type: ignore[arg-type]
        self.web_sessions = SqliteWebSessions(db)  # type: ignore[arg-type]
        self.outbox = SqliteOutbox(db)  # type: ignore[arg-type]
        self.api_keys = SqliteApiKeys(db)  # type: ignore[arg-type]
        self.usage = SqliteUsage(db)  # type: ignore[arg-type]
        self.tables = PgTables(db)

    def tx(self) -> AbstractContextManager[None]:
        return self.database.tx()

    def close(self) -> None:
        self.database.close()


def open_postgres(url: str, components: Iterable[str] = COMPONENTS, *, pool_size: int = 16) -> PostgresState:
    """Connect to ``url`` (a libpq URL or DSN), apply missing migrations, and return the state. Blocking."""
    database = PgDatabase(url, max_size=pool_size)
    components = tuple(components)
    try:
        with database.pool.connection() as conn:
            migrate(conn, components)
            if "state" in components:
                fulltext.ensure(conn)  # a warning when search cannot fold diacritics
    except BaseException:
        database.close()
        raise
    return PostgresState(database)
