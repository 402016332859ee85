"""The transcript's full text on PostgreSQL folds diacritics, as SQLite's FTS5 does (``unicode61
remove_diacritics 2``): "cafe" finds "café", "muller" finds "Müller".

The folding is the ``unaccent`` extension (shipped with PostgreSQL's contrib, trusted since 13: a role
with CREATE on the database may create it). ``unaccent()`` is only STABLE (its dictionary could be
changed), so the index and the queries go through ``kith_unaccent(text)``, an IMMUTABLE wrapper naming
the dictionary with its schema. Where the extension cannot be created (a managed server without it, a
role without the privilege), ``kith_unaccent`` returns its argument: search works as before, without
folding, and the log and ``kith doctor`` say so. Each start checks again, so an extension an
administrator installs later is used from the next start (the function is redefined and the index
rebuilt).
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

log = logging.getLogger("kith.state")

# What the search queries and the index ``turns_words`` (state step 2) read: they must stay identical,
# or the planner does not use the index.
FOLDED = "to_tsvector('simple', kith_unaccent({}))"
QUERY = "plainto_tsquery('simple', kith_unaccent({}))"

# The identity: the fallback, defined first so the index always has its function.
IDENTITY = ("CREATE OR REPLACE FUNCTION kith_unaccent(text) RETURNS text"
            " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT $1'")  # fmt: skip

# Create the extension when possible (its failure is caught here, inside its own subtransaction, so
# the migration around it goes on), then, when it exists in whatever schema, point kith_unaccent at it.
USE_UNACCENT = """DO $kith$
DECLARE
    home text;
BEGIN
    BEGIN
        CREATE EXTENSION IF NOT EXISTS unaccent;
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'kith: unaccent extension not created: %', SQLERRM;
    END;
    SELECT n.nspname INTO home FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'unaccent';
    IF home IS NOT NULL THEN
        EXECUTE format('CREATE OR REPLACE FUNCTION kith_unaccent(text) RETURNS text'
                       ' LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS %L',
                       format('SELECT %I.unaccent(%L::regdictionary, $1)', home, quote_ident(home) || '.unaccent'));
    END IF;
END
$kith$"""

FOLDS = "SELECT kith_unaccent('café') = 'cafe'"
AVAILABLE = "SELECT count(*) FROM pg_available_extensions WHERE name = 'unaccent'"
DOCTOR = (
    "SELECT (SELECT count(*) FROM pg_available_extensions WHERE name = 'unaccent'),"
    " to_regprocedure('kith_unaccent(text)') IS NOT NULL,"
    " EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'unaccent')"
    " OR has_database_privilege(current_database(), 'CREATE')"
    " OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
)

UNAVAILABLE = ("the unaccent extension is not available on this PostgreSQL server: full-text search does not "
               "fold diacritics ('cafe' does not find 'café'; install the server's contrib package)")  # fmt: skip
NOT_CREATED = ("the unaccent extension is not created in this database and kith's role may not create it: "
               "full-text search does not fold diacritics ('cafe' does not find 'café'; an administrator runs "
               "CREATE EXTENSION unaccent, used from kith's next start)")  # fmt: skip


def steps() -> tuple[str, ...]:
    """State step 2: the folding function and the index rebuilt over it."""
    return (
        IDENTITY,
        USE_UNACCENT,
        "DROP INDEX IF EXISTS turns_words",
        f"CREATE INDEX turns_words ON turns USING gin ({FOLDED.format('content')})",
    )


def ensure(conn: psycopg.Connection[Any]) -> bool:
    """Whether the transcript's search folds diacritics, after trying once more to make it (``conn``
    in autocommit mode, the state migrated). Says once in the log when it does not."""
    if _folds(conn):
        return True
    from gateway.state.postgres.migrations import MIGRATION_LOCK  # that module imports this one

    why = UNAVAILABLE
    if _scalar(conn, AVAILABLE):
        why = NOT_CREATED
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))  # one node rebuilds
            if not _folds(conn):
                conn.execute(USE_UNACCENT)
                if _folds(conn):
                    conn.execute("REINDEX INDEX turns_words")
                    log.info("full-text search: the unaccent extension is now used, index turns_words rebuilt")
            if _folds(conn):
                return True
    log.warning("full-text search: %s", why)
    return False


async def describe(conn: psycopg.AsyncConnection[Any]) -> tuple[bool, str]:
    """For ``kith doctor``, read only: (folds, what to say)."""
    cur = await conn.execute(DOCTOR)
    row = await cur.fetchone()
    available, defined, creatable = (int(row[0]), bool(row[1]), bool(row[2])) if row else (0, False, False)
    if defined:
        cur = await conn.execute(FOLDS)
        row = await cur.fetchone()
        if row and row[0]:
            return True, "full-text search folds diacritics (unaccent)"
    if not available:
        return False, UNAVAILABLE
    if not defined and creatable:
        return True, "full-text search will fold diacritics (unaccent, created at kith's first start)"
    return False, NOT_CREATED


def _folds(conn: psycopg.Connection[Any]) -> bool:
    return bool(_scalar(conn, FOLDS))


def _scalar(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    return row[0] if row else None
