"""Operational state in SQLite (WAL): users, identities, link codes, sessions, turns, dedupe keys,
conversations.

Statements are short and run on the event-loop thread: with WAL and ``synchronous=NORMAL`` a commit
does not fsync, so a turn's writes cost tens of microseconds, cheaper than a thread hop. Everything
behind this one class so a PostgreSQL backend can replace it later.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    user_id TEXT PRIMARY KEY,
    display_name TEXT NOT NULL DEFAULT '',
    timezone TEXT NOT NULL DEFAULT 'UTC',
    created_at TEXT NOT NULL
);
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
CREATE TABLE IF NOT EXISTS compactions (
    session_id TEXT PRIMARY KEY,
    upto_seq INTEGER NOT NULL,
    summary TEXT NOT NULL,
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
"""


def enable_wal(db: sqlite3.Connection) -> None:
    """Switch a connection's database to WAL. Two processes opening a new database together (the
    daemon and a kith worker) both try it; the loser gets "database is locked" at once, without the
    busy handler, so it waits and tries again."""
    for attempt in range(50):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.1)


def ts(dt: datetime | None = None) -> str:
    """The one timestamp format stored: UTC ``YYYY-MM-DD HH:MM:SS.ffffff`` (lexically ordered,
    and comparable with SQLite's ``datetime('now')`` prefix)."""
    dt = dt or datetime.now(UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def parse_ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)


class State:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA busy_timeout=5000")
        enable_wal(self.db)
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        return self.db.execute(sql, args).fetchone()  # type: ignore[no-any-return]

    def all(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        return self.db.execute(sql, args).fetchall()

    # ------------------------------------------------------------------------------- dedupe
    def seen(self, channel: str, message_id: str) -> bool:
        return self.one("SELECT 1 FROM dedupe WHERE channel=? AND message_id=?", channel, message_id) is not None

    def mark_seen(self, channel: str, message_id: str) -> bool:
        """Record a dedupe key; False when it was already there (a redelivery)."""
        cur = self.db.execute(
            "INSERT OR IGNORE INTO dedupe(channel, message_id, created_at) VALUES (?,?,?)",
            (channel, message_id, ts()),
        )
        return cur.rowcount == 1

    # -------------------------------------------------------------------------------- users
    def users(self) -> list[sqlite3.Row]:
        return self.all("SELECT user_id, display_name, timezone FROM users ORDER BY user_id")

    def user(self, user_id: str) -> sqlite3.Row | None:
        return self.one("SELECT * FROM users WHERE user_id=?", user_id)

    # ---------------------------------------------------------------------------- sessions
    def open_session(self, scope_key: str) -> sqlite3.Row | None:
        return self.one(
            "SELECT * FROM sessions WHERE scope_key=? AND ended_at IS NULL ORDER BY started_at DESC LIMIT 1",
            scope_key,
        )

    def history(self, session_id: str, limit: int, after_seq: int = 0) -> list[sqlite3.Row]:
        rows = self.all(
            "SELECT role, content, created_at, turn_id FROM turns WHERE session_id=? AND seq>?"
            " ORDER BY seq DESC LIMIT ?",
            session_id,
            after_seq,
            limit,
        )
        rows.reverse()
        return rows

    def compaction(self, session_id: str) -> sqlite3.Row | None:
        """The session's compacted prefix: turns up to ``upto_seq`` live on as ``summary``."""
        return self.one("SELECT upto_seq, summary, updated_at FROM compactions WHERE session_id=?", session_id)

    def table_names(self) -> list[str]:
        return [r[0] for r in self.all("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
