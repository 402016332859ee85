"""Versioned schema migrations of the PostgreSQL backend: the same components and step model as SQLite's
(``gateway.state.sqlite.migrations``), each with its own list of steps and ``schema_version`` rows.

Step 1 of each component is the schema as SQLite has it after all of its steps, in PostgreSQL types, so
``kith state migrate`` copies every row as it is: timestamps stay text in the one stored form
(``gateway.state.timestamps``: fixed width, so text order is time order), ``INTEGER`` is ``BIGINT``
(SQLite's integers are 64-bit), ``REAL`` is ``DOUBLE PRECISION``, and text columns compare bytewise
(``COLLATE "C"``, SQLite's ``BINARY``) whatever the database's locale. The ``AUTOINCREMENT`` columns
(``turns.seq``, ``kg_facts.id``) are identities ``BY DEFAULT``, so a copy keeps their values (and then
moves the sequence past them, ``gateway.state.postgres.tables``). The transcript's full-text search is a
GIN index over ``to_tsvector('simple', kith_unaccent(content))``, not a table (state step 2: diacritics
folded as FTS5 folds them, ``gateway.state.postgres.fulltext``); SQLite's unenforced foreign key
(``identities.user_id``) is not declared, so the data SQLite accepted is accepted here too.

A new schema change is a new step at the end of its component's list in BOTH backends:
tests/state/test_schema_parity.py migrates a SQLite file and a PostgreSQL database and fails on any
difference in tables, columns (types mapped), keys and indexes.

Applying: one transaction (PostgreSQL's DDL is transactional) under a transaction-level advisory lock,
so two processes starting together never both apply a step: the second waits, then finds the
versions current.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import psycopg

from gateway.state.migrate import Dialect
from gateway.state.migrate import migrate as run_migrations
from gateway.state.postgres import fulltext

# pg_advisory_xact_lock key of schema migrations (any constant unlikely to clash: "kith" "mig").
MIGRATION_LOCK = 0x6B697468_6D6967

_STATE_V1 = """
CREATE TABLE access_approved (
    channel TEXT COLLATE "C" NOT NULL,
    account_id TEXT COLLATE "C" NOT NULL,
    display_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    approved_at TEXT COLLATE "C" NOT NULL,
    via TEXT COLLATE "C" NOT NULL DEFAULT 'pairing',
    PRIMARY KEY (channel, account_id)
);
CREATE TABLE access_invites (
    code TEXT COLLATE "C" PRIMARY KEY,
    channel TEXT COLLATE "C" NOT NULL DEFAULT '',
    note TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at TEXT COLLATE "C" NOT NULL,
    expires_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE access_pairing (
    code TEXT COLLATE "C" PRIMARY KEY,
    channel TEXT COLLATE "C" NOT NULL,
    account_id TEXT COLLATE "C" NOT NULL,
    display_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at TEXT COLLATE "C" NOT NULL,
    expires_at TEXT COLLATE "C" NOT NULL,
    last_reply_at TEXT COLLATE "C" NOT NULL,
    requests BIGINT NOT NULL DEFAULT 1,
    UNIQUE (channel, account_id)
);
CREATE TABLE access_pairing_issued (
    channel TEXT COLLATE "C" NOT NULL,
    account_id TEXT COLLATE "C" NOT NULL,
    issued_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE access_pairing_stats (
    channel TEXT COLLATE "C" PRIMARY KEY,
    refused BIGINT NOT NULL DEFAULT 0,
    evicted BIGINT NOT NULL DEFAULT 0,
    over_quota BIGINT NOT NULL DEFAULT 0,
    since TEXT COLLATE "C" NOT NULL,
    last_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE bg_distill (
    user_id TEXT COLLATE "C" NOT NULL,
    tier TEXT COLLATE "C" NOT NULL,
    status TEXT COLLATE "C" NOT NULL,
    detail TEXT COLLATE "C" NOT NULL DEFAULT '',
    chars BIGINT NOT NULL DEFAULT 0,
    started_at TEXT COLLATE "C" NOT NULL,
    finished_at TEXT COLLATE "C",
    PRIMARY KEY (user_id, tier)
);
CREATE TABLE bg_retention (
    scope TEXT COLLATE "C" PRIMARY KEY,
    last_cutoff TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE bg_sleep (
    scope TEXT COLLATE "C" PRIMARY KEY,
    last_seq BIGINT NOT NULL DEFAULT 0,
    last_slot TEXT COLLATE "C" NOT NULL DEFAULT '',
    updated_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE bg_sleep_runs (
    scope TEXT COLLATE "C" NOT NULL,
    slot TEXT COLLATE "C" NOT NULL,
    day TEXT COLLATE "C" NOT NULL,
    first_seq BIGINT NOT NULL,
    upto_seq BIGINT NOT NULL,
    turns BIGINT NOT NULL,
    output TEXT COLLATE "C" NOT NULL DEFAULT '',
    stage TEXT COLLATE "C" NOT NULL,
    detail TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (scope, slot)
);
CREATE TABLE bg_writer (
    session_id TEXT COLLATE "C" PRIMARY KEY,
    last_seq BIGINT NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE compactions (
    session_id TEXT COLLATE "C" PRIMARY KEY,
    upto_seq BIGINT NOT NULL,
    summary TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE conversations (
    conversation_key TEXT COLLATE "C" PRIMARY KEY,
    channel TEXT COLLATE "C" NOT NULL,
    conversation_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    persona TEXT COLLATE "C" NOT NULL DEFAULT 'default',
    last_seen_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE dedupe (
    channel TEXT COLLATE "C" NOT NULL,
    message_id TEXT COLLATE "C" NOT NULL,
    created_at TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (channel, message_id)
);
CREATE TABLE identities (
    channel TEXT COLLATE "C" NOT NULL,
    account_id TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    display_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    source TEXT COLLATE "C" NOT NULL DEFAULT 'auto',
    created_at TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (channel, account_id)
);
CREATE TABLE link_requests (
    code TEXT COLLATE "C" PRIMARY KEY,
    issuer_user TEXT COLLATE "C" NOT NULL,
    issuer_channel TEXT COLLATE "C" NOT NULL,
    issuer_account TEXT COLLATE "C" NOT NULL,
    issuer_conversation TEXT COLLATE "C" NOT NULL DEFAULT '',
    issuer_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    issuer_token TEXT COLLATE "C" NOT NULL DEFAULT '',
    issuer_ok BIGINT NOT NULL DEFAULT 0,
    redeemer_user TEXT COLLATE "C",
    redeemer_channel TEXT COLLATE "C",
    redeemer_account TEXT COLLATE "C",
    redeemer_conversation TEXT COLLATE "C" NOT NULL DEFAULT '',
    redeemer_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    redeemer_token TEXT COLLATE "C" NOT NULL DEFAULT '',
    redeemer_ok BIGINT NOT NULL DEFAULT 0,
    created_at TEXT COLLATE "C" NOT NULL,
    expires_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE persona_choices (
    user_id TEXT COLLATE "C" NOT NULL,
    conversation_key TEXT COLLATE "C" NOT NULL,
    persona TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, conversation_key)
);
CREATE TABLE sessions (
    session_id TEXT COLLATE "C" PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    scope_key TEXT COLLATE "C" NOT NULL,
    conversation_key TEXT COLLATE "C" NOT NULL,
    persona TEXT COLLATE "C" NOT NULL DEFAULT 'default',
    started_at TEXT COLLATE "C" NOT NULL,
    last_active_at TEXT COLLATE "C" NOT NULL,
    ended_at TEXT COLLATE "C"
);
CREATE TABLE turn_contexts (
    turn_id TEXT COLLATE "C" PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    created_at TEXT COLLATE "C" NOT NULL,
    data TEXT COLLATE "C" NOT NULL
);
CREATE TABLE turns (
    seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    turn_id TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    role TEXT COLLATE "C" NOT NULL,
    content TEXT COLLATE "C" NOT NULL,
    channel TEXT COLLATE "C" NOT NULL,
    conversation_key TEXT COLLATE "C" NOT NULL,
    speaker TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE users (
    user_id TEXT COLLATE "C" PRIMARY KEY,
    display_name TEXT COLLATE "C" NOT NULL DEFAULT '',
    timezone TEXT COLLATE "C" NOT NULL DEFAULT 'UTC',
    created_at TEXT COLLATE "C" NOT NULL,
    tier BIGINT
);
CREATE TABLE watermarks (
    name TEXT COLLATE "C" PRIMARY KEY,
    seq BIGINT NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE web_sessions (
    session_hash TEXT COLLATE "C" PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    operator BIGINT NOT NULL DEFAULT 0,
    via TEXT COLLATE "C" NOT NULL,
    created_at TEXT COLLATE "C" NOT NULL,
    last_seen_at TEXT COLLATE "C" NOT NULL,
    expires_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE web_signin_tokens (
    token_hash TEXT COLLATE "C" PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    operator BIGINT NOT NULL DEFAULT 0,
    issued_by TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at TEXT COLLATE "C" NOT NULL,
    expires_at TEXT COLLATE "C" NOT NULL
);
CREATE INDEX access_pairing_issued_account ON access_pairing_issued(channel, account_id);
CREATE INDEX dedupe_created ON dedupe(created_at);
CREATE INDEX identities_user ON identities(user_id);
CREATE INDEX link_requests_issuer ON link_requests(issuer_channel, issuer_account);
CREATE INDEX link_requests_redeemer ON link_requests(redeemer_channel, redeemer_account);
CREATE INDEX sessions_scope ON sessions(scope_key, ended_at);
CREATE INDEX sessions_scope_started ON sessions(scope_key, started_at);
CREATE INDEX turn_contexts_created ON turn_contexts(created_at);
CREATE INDEX turns_session ON turns(session_id, seq);
CREATE INDEX turns_user ON turns(user_id, seq);
CREATE INDEX users_created ON users(created_at, user_id);
CREATE INDEX users_timezone ON users(timezone, user_id);
CREATE INDEX web_sessions_expires ON web_sessions(expires_at);
CREATE INDEX web_sessions_user ON web_sessions(user_id);
CREATE INDEX web_signin_tokens_expires ON web_signin_tokens(expires_at);
CREATE INDEX web_signin_tokens_user ON web_signin_tokens(user_id);
-- The full-text search of a person's transcript (SQLite: the FTS5 table turns_fts).
CREATE INDEX turns_words ON turns USING gin (to_tsvector('simple', content));
"""

_KNOWLEDGE_V1 = """
CREATE TABLE kg_facts (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    subject TEXT COLLATE "C" NOT NULL,
    subject_key TEXT COLLATE "C" NOT NULL,
    predicate TEXT COLLATE "C" NOT NULL,
    object TEXT COLLATE "C" NOT NULL,
    object_key TEXT COLLATE "C" NOT NULL,
    valid_from TEXT COLLATE "C" NOT NULL,
    valid_until TEXT COLLATE "C",
    confidence DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    source_type TEXT COLLATE "C" NOT NULL DEFAULT '',
    source_ref TEXT COLLATE "C" NOT NULL DEFAULT '',
    replay_key TEXT COLLATE "C" UNIQUE,
    created_at TEXT COLLATE "C" NOT NULL
);
CREATE INDEX kg_facts_object ON kg_facts(user_id, object_key);
CREATE UNIQUE INDEX kg_facts_open_unique ON kg_facts(user_id, subject_key, predicate, object_key)
    WHERE valid_until IS NULL;
CREATE INDEX kg_facts_subject ON kg_facts(user_id, subject_key, predicate);
CREATE INDEX kg_facts_until ON kg_facts(valid_until);
"""

_API_KEYS_V1 = """
CREATE TABLE api_keys (
    key_hash TEXT COLLATE "C" PRIMARY KEY,
    key_id TEXT COLLATE "C" NOT NULL UNIQUE,
    user_id TEXT COLLATE "C" NOT NULL,
    label TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at TEXT COLLATE "C" NOT NULL,
    last_used_at TEXT COLLATE "C"
);
CREATE INDEX api_keys_user ON api_keys(user_id);
"""

_DELIVERY_V1 = """
CREATE TABLE delivery_prefs (
    user_id TEXT COLLATE "C" PRIMARY KEY,
    preferred_channel TEXT COLLATE "C" NOT NULL DEFAULT '',
    quiet_start TEXT COLLATE "C" NOT NULL DEFAULT '',
    quiet_end TEXT COLLATE "C" NOT NULL DEFAULT '',
    notify_conversation TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE TABLE outbox (
    delivery_id TEXT COLLATE "C" PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    text TEXT COLLATE "C" NOT NULL,
    notice BIGINT NOT NULL DEFAULT 0,
    origin TEXT COLLATE "C" NOT NULL DEFAULT '',
    status TEXT COLLATE "C" NOT NULL,
    due_at TEXT COLLATE "C" NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    created_at TEXT COLLATE "C" NOT NULL,
    sent_at TEXT COLLATE "C",
    channel TEXT COLLATE "C" NOT NULL DEFAULT '',
    detail TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX outbox_due ON outbox(status, due_at);
CREATE INDEX outbox_user ON outbox(user_id, status, created_at);
"""

_USAGE_V1 = """
CREATE TABLE llm_usage (
    user_id TEXT COLLATE "C" NOT NULL,
    day TEXT COLLATE "C" NOT NULL,
    role TEXT COLLATE "C" NOT NULL,
    provider TEXT COLLATE "C" NOT NULL,
    model TEXT COLLATE "C" NOT NULL,
    calls BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day, role, provider, model)
);
CREATE INDEX llm_usage_day ON llm_usage(day, user_id);
"""



def _script(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(";") if s.strip())


# component -> its steps (summary, statements). Step 1 is SQLite's whole history of that component.
_SESSION_TITLES_V1 = """
CREATE TABLE session_titles (
    session_id TEXT COLLATE "C" PRIMARY KEY,
    user_id TEXT COLLATE "C" NOT NULL,
    title TEXT COLLATE "C" NOT NULL,
    set_at TEXT COLLATE "C" NOT NULL
)
"""

_APPROVAL_AUDIT_V1 = """
CREATE TABLE approval_audit (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at TEXT COLLATE "C" NOT NULL,
    approval_id TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    tool TEXT COLLATE "C" NOT NULL,
    outcome TEXT COLLATE "C" NOT NULL,
    summary TEXT COLLATE "C" NOT NULL DEFAULT '',
    note TEXT COLLATE "C" NOT NULL DEFAULT '',
    expires_at TEXT COLLATE "C",
    waiting BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX approval_audit_user ON approval_audit(user_id, id);
CREATE INDEX approval_audit_outcome ON approval_audit(outcome, id);
CREATE INDEX approval_audit_waiting ON approval_audit(waiting, expires_at);
"""

MIGRATIONS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "state": (
        ("the state tables as of SQLite state step 5", _script(_STATE_V1)),
        # No SQLite counterpart: FTS5's tokenizer has folded diacritics from the start.
        ("full text folds diacritics (unaccent, where the server has it)", fulltext.steps()),
    ),
    "knowledge": (("the knowledge graph as of SQLite knowledge step 2", _script(_KNOWLEDGE_V1)),),
    "api_keys": (("API keys of the OpenAI-compatible endpoint", _script(_API_KEYS_V1)),),
    "delivery": (("the delivery outbox and delivery settings", _script(_DELIVERY_V1)),),
    "usage": (("model token use and cost per person, day, role and model", _script(_USAGE_V1)),),
    "session_titles": (("conversation titles the person chose", _script(_SESSION_TITLES_V1)),),
    "approval_audit": (("the audit of tool calls that waited for a person's approval", _script(_APPROVAL_AUDIT_V1)),),
}
COMPONENTS = tuple(MIGRATIONS)


def latest(component: str) -> int:
    return len(MIGRATIONS[component])


class _Postgres(Dialect[psycopg.Connection, tuple[str, tuple[str, ...]]]):
    placeholder = "%s"
    version_table = ('CREATE TABLE IF NOT EXISTS schema_version (component TEXT COLLATE "C" PRIMARY KEY,'
                     ' version BIGINT NOT NULL, updated_at TEXT COLLATE "C" NOT NULL)')  # fmt: skip
    errors = psycopg.Error

    def versions(self, conn: psycopg.Connection) -> dict[str, int]:
        exists = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return {}
        return {str(c): int(v) for c, v in conn.execute("SELECT component, version FROM schema_version")}

    @contextmanager
    def locked(self, conn: psycopg.Connection) -> Iterator[None]:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            yield

    def apply(self, conn: psycopg.Connection, step: tuple[str, tuple[str, ...]]) -> None:
        for statement in step[1]:
            conn.execute(statement)


def migrate(conn: psycopg.Connection, components: Iterable[str] = COMPONENTS) -> None:
    """Bring ``components`` up to their latest step. ``conn`` is in autocommit mode."""
    run_migrations(conn, _Postgres(), MIGRATIONS, components)
