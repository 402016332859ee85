"""Versioned schema migrations of the SQLite backend.

Each component of the schema has an ordered list of steps; ``schema_version`` records, per component,
how many have been applied. Opening a database applies the missing steps, all in one ``BEGIN
IMMEDIATE`` transaction (SQLite's DDL is transactional: a failing step leaves the file as it was),
so two processes opening a database together (the daemon and a kith worker) never both apply one.
A database written by a newer kith (a version past the last step) is refused, not guessed at.

Components: ``state`` holds everything the gateway keeps (users, identities, sessions, the
transcript, dedupe keys, conversations, link requests, the access tables, job progress); ``knowledge``
holds the knowledge graph, which may also live in a file of its own (``kith facts`` on a copy, tests).

Step 1 of each component is the schema kith created before migrations existed, verbatim (``CREATE
... IF NOT EXISTS``), so a data directory made by an older kith is upgraded in place: step 1 finds its
tables and keeps their rows, later steps change them. A new schema change is a new step at the end of
its list, never an edit of an applied one (tests/state/test_migrations.py opens a data directory made
by the code before this module and checks that it keeps its rows).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gateway.state.migrate import Dialect
from gateway.state.migrate import migrate as run_migrations


@dataclass(frozen=True, slots=True)
class Migration:
    summary: str
    statements: tuple[str, ...] = ()
    apply: Callable[[sqlite3.Connection], None] | None = None  # data changes SQL alone cannot express


def _script(text: str) -> tuple[str, ...]:
    """A script of ``;``-separated statements (none of ours has a ``;`` inside a literal or comment)."""
    return tuple(s.strip() for s in text.split(";") if s.strip())


_STATE_V1 = """
CREATE TABLE IF NOT EXISTS users (
    user_id TEXT PRIMARY KEY,
    display_name TEXT NOT NULL DEFAULT '',
    timezone TEXT NOT NULL DEFAULT 'UTC',
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS users_timezone ON users(timezone, user_id);
CREATE INDEX IF NOT EXISTS users_created ON users(created_at, user_id);
CREATE TABLE IF NOT EXISTS identities (
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(user_id),
    display_name TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT 'auto',
    created_at TEXT NOT NULL,
    PRIMARY KEY (channel, account_id)
);
CREATE INDEX IF NOT EXISTS identities_user ON identities(user_id);
CREATE TABLE IF NOT EXISTS link_codes (
    code TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    persona TEXT NOT NULL DEFAULT 'default',
    started_at TEXT NOT NULL,
    last_active_at TEXT NOT NULL,
    ended_at TEXT
);
CREATE INDEX IF NOT EXISTS sessions_scope ON sessions(scope_key, ended_at);
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    channel TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    speaker TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_session ON turns(session_id, seq);
CREATE INDEX IF NOT EXISTS turns_user ON turns(user_id, seq);
CREATE TABLE IF NOT EXISTS dedupe (
    channel TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (channel, message_id)
);
CREATE INDEX IF NOT EXISTS dedupe_created ON dedupe(created_at);
CREATE TABLE IF NOT EXISTS compactions (
    session_id TEXT PRIMARY KEY,
    upto_seq INTEGER NOT NULL,
    summary TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS watermarks (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversations (
    conversation_key TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    persona TEXT NOT NULL DEFAULT 'default',
    last_seen_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS link_requests (
    code TEXT PRIMARY KEY,
    issuer_user TEXT NOT NULL,
    issuer_channel TEXT NOT NULL,
    issuer_account TEXT NOT NULL,
    issuer_conversation TEXT NOT NULL DEFAULT '',
    issuer_name TEXT NOT NULL DEFAULT '',
    issuer_token TEXT NOT NULL DEFAULT '',
    issuer_ok INTEGER NOT NULL DEFAULT 0,
    redeemer_user TEXT,
    redeemer_channel TEXT,
    redeemer_account TEXT,
    redeemer_conversation TEXT NOT NULL DEFAULT '',
    redeemer_name TEXT NOT NULL DEFAULT '',
    redeemer_token TEXT NOT NULL DEFAULT '',
    redeemer_ok INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS link_requests_issuer ON link_requests(issuer_channel, issuer_account);
CREATE INDEX IF NOT EXISTS link_requests_redeemer ON link_requests(redeemer_channel, redeemer_account);
CREATE TABLE IF NOT EXISTS access_pairing (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    last_reply_at TEXT NOT NULL,
    requests INTEGER NOT NULL DEFAULT 1,
    UNIQUE (channel, account_id)
);
CREATE TABLE IF NOT EXISTS access_pairing_issued (
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    issued_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS access_pairing_issued_account ON access_pairing_issued(channel, account_id);
CREATE TABLE IF NOT EXISTS access_pairing_stats (
    channel TEXT PRIMARY KEY,
    refused INTEGER NOT NULL DEFAULT 0,
    evicted INTEGER NOT NULL DEFAULT 0,
    over_quota INTEGER NOT NULL DEFAULT 0,
    since TEXT NOT NULL,
    last_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS access_invites (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS access_approved (
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    approved_at TEXT NOT NULL,
    via TEXT NOT NULL DEFAULT 'pairing',
    PRIMARY KEY (channel, account_id)
);
CREATE TABLE IF NOT EXISTS bg_writer (
    session_id TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bg_sleep (
    scope TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL DEFAULT 0,
    last_slot TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bg_sleep_runs (
    scope TEXT NOT NULL,
    slot TEXT NOT NULL,
    day TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    upto_seq INTEGER NOT NULL,
    turns INTEGER NOT NULL,
    output TEXT NOT NULL DEFAULT '',
    stage TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, slot)
);
CREATE TABLE IF NOT EXISTS bg_distill (
    user_id TEXT NOT NULL,
    tier TEXT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    chars INTEGER NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (user_id, tier)
);
CREATE TABLE IF NOT EXISTS bg_retention (
    scope TEXT PRIMARY KEY,
    last_cutoff TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"""

# Personas per person (docs/personas.md): the persona a person chose per conversation ('' = their default).
_PERSONA_CHOICES = """
CREATE TABLE persona_choices (
    user_id TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    persona TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, conversation_key)
)
"""

# Web sign-in (docs/security.md#sign-in): secrets are stored as SHA-256 hashes only.
_WEB_SESSIONS = """
CREATE TABLE web_signin_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    operator INTEGER NOT NULL DEFAULT 0,
    issued_by TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX web_signin_tokens_user ON web_signin_tokens(user_id);
CREATE INDEX web_signin_tokens_expires ON web_signin_tokens(expires_at);
CREATE TABLE web_sessions (
    session_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    operator INTEGER NOT NULL DEFAULT 0,
    via TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX web_sessions_user ON web_sessions(user_id);
CREATE INDEX web_sessions_expires ON web_sessions(expires_at)
"""

# The person-facing API (issue 14, docs/api.md): a person's own context tier; their sessions listed by
# start; full-text search over the transcript (an external-content FTS5 index kept by triggers, so the
# turn path pays one small index insert per row); what the model saw per turn. Triggers hold ";" inside
# BEGIN ... END, so these statements are listed one by one rather than split from a script.
_PERSON_API: tuple[str, ...] = (
    "ALTER TABLE users ADD COLUMN tier INTEGER",
    "CREATE INDEX sessions_scope_started ON sessions(scope_key, started_at)",
    "CREATE VIRTUAL TABLE turns_fts USING fts5(content, content='turns', content_rowid='seq',"
    " tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN"
    " INSERT INTO turns_fts(rowid, content) VALUES (new.seq, new.content); END",
    "CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN"
    " INSERT INTO turns_fts(turns_fts, rowid, content) VALUES ('delete', old.seq, old.content); END",
    "CREATE TRIGGER turns_fts_update AFTER UPDATE OF content ON turns BEGIN"
    " INSERT INTO turns_fts(turns_fts, rowid, content) VALUES ('delete', old.seq, old.content);"
    " INSERT INTO turns_fts(rowid, content) VALUES (new.seq, new.content); END",
    "INSERT INTO turns_fts(turns_fts) VALUES ('rebuild')",
    "CREATE TABLE turn_contexts (turn_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, session_id TEXT NOT NULL,"
    " created_at TEXT NOT NULL, data TEXT NOT NULL)",
    "CREATE INDEX turn_contexts_created ON turn_contexts(created_at)",
)

# Keys of the OpenAI-compatible endpoint (docs/openai-api.md): stored as SHA-256 hashes only.
_API_KEYS = """
CREATE TABLE api_keys (
    key_hash TEXT PRIMARY KEY,
    key_id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    last_used_at TEXT
);
CREATE INDEX api_keys_user ON api_keys(user_id)
"""

_KNOWLEDGE_V1 = """
CREATE TABLE IF NOT EXISTS kg_facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    predicate TEXT NOT NULL,
    object TEXT NOT NULL,
    object_key TEXT NOT NULL,
    valid_from TEXT NOT NULL,
    valid_until TEXT,
    confidence REAL NOT NULL DEFAULT 1.0,
    source_type TEXT NOT NULL DEFAULT '',
    source_ref TEXT NOT NULL DEFAULT '',
    replay_key TEXT UNIQUE,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS kg_facts_subject ON kg_facts(user_id, subject_key, predicate);
CREATE INDEX IF NOT EXISTS kg_facts_object ON kg_facts(user_id, object_key);
CREATE INDEX IF NOT EXISTS kg_facts_until ON kg_facts(valid_until);
-- At most one open-ended row per exact fact: a safety net under the duplicate check in add().
CREATE UNIQUE INDEX IF NOT EXISTS kg_facts_open_unique
    ON kg_facts(user_id, subject_key, predicate, object_key) WHERE valid_until IS NULL;
CREATE TABLE IF NOT EXISTS kg_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO kg_meta(key, value) VALUES ('schema_version', '1');
"""

# The delivery outbox (gateway/delivery/): a component of its own, so its steps never interleave with
# the state component's (other features add steps there).
_OUTBOX = (
    "CREATE TABLE outbox (delivery_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " text TEXT NOT NULL, notice INTEGER NOT NULL DEFAULT 0, origin TEXT NOT NULL DEFAULT '',"
    " status TEXT NOT NULL, due_at TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL,"
    " sent_at TEXT, channel TEXT NOT NULL DEFAULT '', detail TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX outbox_due ON outbox(status, due_at)",
    "CREATE INDEX outbox_user ON outbox(user_id, status, created_at)",
    "CREATE TABLE delivery_prefs (user_id TEXT PRIMARY KEY, preferred_channel TEXT NOT NULL DEFAULT '',"
    " quiet_start TEXT NOT NULL DEFAULT '', quiet_end TEXT NOT NULL DEFAULT '',"
    " notify_conversation TEXT NOT NULL DEFAULT '')",
)

# Model token use and cost (gateway/state/usage.py): one row per person, UTC day, role and model.
_USAGE = (
    "CREATE TABLE llm_usage (user_id TEXT NOT NULL, day TEXT NOT NULL, role TEXT NOT NULL, provider TEXT NOT NULL,"
    " model TEXT NOT NULL, calls INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,"
    " output_tokens INTEGER NOT NULL DEFAULT 0, cache_read_tokens INTEGER NOT NULL DEFAULT 0,"
    " cache_write_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0,"
    " PRIMARY KEY (user_id, day, role, provider, model))",
    "CREATE INDEX llm_usage_day ON llm_usage(day, user_id)",
)

# A name the person gave a past conversation (issue 33, the chat's History); none: its first message.
_SESSION_TITLES = (
    "CREATE TABLE session_titles (session_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, title TEXT NOT NULL,"
    " set_at TEXT NOT NULL)",
)

# Every step of a tool call that waited for a person's approval (gateway/state/approvals.py): a
# ``requested`` row waits (``waiting=1``) until answered or its ``expires_at`` has passed.
_APPROVAL_AUDIT = (
    "CREATE TABLE approval_audit (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL,"
    " approval_id TEXT NOT NULL, user_id TEXT NOT NULL, tool TEXT NOT NULL, outcome TEXT NOT NULL,"
    " summary TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '', expires_at TEXT,"
    " waiting INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX approval_audit_user ON approval_audit(user_id, id)",
    "CREATE INDEX approval_audit_outcome ON approval_audit(outcome, id)",
    "CREATE INDEX approval_audit_waiting ON approval_audit(waiting, expires_at)",
)

MIGRATIONS: dict[str, tuple[Migration, ...]] = {
    "state": (
        Migration("the tables before versioned migrations (state.py, linking.py, access.py, progress.py)",
                  _script(_STATE_V1)),
        # Superseded by link_requests (the two-sided /link confirmation); nothing reads it.
        Migration("drop link_codes", ("DROP TABLE IF EXISTS link_codes",)),
        Migration("persona choices per person and conversation", _script(_PERSONA_CHOICES)),
        Migration("web sign-in tokens and browser sessions (issue 14)", _script(_WEB_SESSIONS)),
        Migration("person settings (tier), session listing, transcript full-text search, turn contexts",
                  _PERSON_API),
    ),
    "knowledge": (
        Migration("the knowledge graph before versioned migrations (kg_schema.py)", _script(_KNOWLEDGE_V1)),
        # Its schema version now lives in schema_version, with every other component's.
        Migration("drop kg_meta", ("DROP TABLE IF EXISTS kg_meta",)),
    ),
    # A component of its own, so its steps never interleave with other features' steps of ``state``.
    "api_keys": (
        Migration("API keys of the OpenAI-compatible endpoint (issue 15)", _script(_API_KEYS)),
    ),
    "delivery": (
        Migration("the delivery outbox and delivery settings (issue 16)", _OUTBOX),
    ),
    "usage": (
        Migration("model token use and cost per person, day, role and model (issue 15)", _USAGE),
    ),
    "session_titles": (
        Migration("conversation titles the person chose (issue 33)", _SESSION_TITLES),
    ),
    "approval_audit": (
        Migration("the audit of tool calls that waited for a person's approval (issue 32)", _APPROVAL_AUDIT),
    ),
}
COMPONENTS = tuple(MIGRATIONS)


def latest(component: str) -> int:
    return len(MIGRATIONS[component])


class _Sqlite(Dialect[sqlite3.Connection, Migration]):
    placeholder = "?"
    version_table = ("CREATE TABLE IF NOT EXISTS schema_version (component TEXT PRIMARY KEY, version INTEGER NOT NULL,"
                     " updated_at TEXT NOT NULL)")  # fmt: skip
    errors = sqlite3.Error

    def versions(self, conn: sqlite3.Connection) -> dict[str, int]:
        try:
            return {str(c): int(v) for c, v in conn.execute("SELECT component, version FROM schema_version")}
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # a database older than migrations, or a new one
                return {}
            raise

    @contextmanager
    def locked(self, conn: sqlite3.Connection) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock at once: a second process migrating waits for it
        # (busy timeout), then finds the versions current.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def apply(self, conn: sqlite3.Connection, step: Migration) -> None:
        for statement in step.statements:
            conn.execute(statement)
        if step.apply is not None:
            step.apply(conn)


def migrate(conn: sqlite3.Connection, components: Iterable[str] = COMPONENTS) -> None:
    """Bring ``components`` up to their latest step. ``conn`` is in autocommit mode."""
    run_migrations(conn, _Sqlite(), MIGRATIONS, components)
