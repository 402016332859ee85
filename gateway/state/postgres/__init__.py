"""The PostgreSQL backend: a connection pool, every store on it (``state.url: postgresql://...``).

The portable stores (``gateway.state.stores``) on the psycopg driver (``database``, placeholders by
``dialect``), with this backend's own full text (``transcript``: a GIN index, ``fulltext``: diacritics),
schema catalogue and erase (``people``), whole tables (``tables``) and migrations: the same components
and step model as SQLite's. SQL lives here, in ``gateway.state.sqlite`` and in the portable stores only
(tests/core/test_storage_seam.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager

from gateway.state.postgres import fulltext
from gateway.state.postgres.database import PgDatabase
from gateway.state.postgres.migrations import COMPONENTS, migrate
from gateway.state.postgres.people import PostgresPeople
from gateway.state.postgres.tables import PgTables
from gateway.state.postgres.transcript import PostgresTurns
from gateway.state.stores import Stores

__all__ = ["PostgresState", "open_postgres"]


class PostgresState(Stores):
    """``gateway.state.State`` on a PostgreSQL database."""

    def __init__(self, database: PgDatabase) -> None:
        self.url = database.url
        self.database = database
        super().__init__(database, turns=PostgresTurns(database), people=PostgresPeople(database))
        self.tables = PgTables(database)

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
