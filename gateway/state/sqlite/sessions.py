"""Sessions, conversations and dedupe keys on SQLite."""

from __future__ import annotations

from datetime import datetime

from gateway.state.records import Conversation, StoredSession
from gateway.state.sqlite.database import Database, Row
from gateway.state.timestamps import parse_ts, ts

_SESSION = "session_id, user_id, scope_key, conversation_key, persona, started_at, last_active_at, ended_at"


def _session(r: Row) -> StoredSession:
    return StoredSession(session_id=r[0], user_id=r[1], scope_key=r[2], conversation_key=r[3], persona=r[4],
                         started_at=parse_ts(r[5]), last_active_at=parse_ts(r[6]),
                         ended_at=parse_ts(r[7]) if r[7] is not None else None)  # fmt: skip


class SqliteSessions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, session_id: str) -> StoredSession | None:
        row = self._db.one(f"SELECT {_SESSION} FROM sessions WHERE session_id=?", (session_id,))
        return _session(row) if row else None

    def open_in(self, scope_key: str) -> StoredSession | None:
        """The newest session of the scope that has not ended."""
        row = self._db.one(
            f"SELECT {_SESSION} FROM sessions WHERE scope_key=? AND ended_at IS NULL ORDER BY started_at DESC LIMIT 1",
            (scope_key,),
        )
        return _session(row) if row else None

    def open_ids(self, scope_key: str) -> list[str]:
        """Ids of every open session of the scope, newest first."""
        return [r[0] for r in self._db.all(
            "SELECT session_id FROM sessions WHERE scope_key=? AND ended_at IS NULL ORDER BY started_at DESC",
            (scope_key,))]  # fmt: skip

    def last_ended(self, scope_key: str, *, excluding: str) -> str | None:
        """The session of the scope that ended last, other than ``excluding``."""
        row = self._db.one(
            "SELECT session_id FROM sessions WHERE scope_key=? AND session_id<>? AND ended_at IS NOT NULL"
            " ORDER BY ended_at DESC LIMIT 1",
            (scope_key, excluding),
        )
        return row[0] if row else None

    def create(self, session_id: str, *, user_id: str, scope_key: str, conversation_key: str, persona: str,
               at: datetime) -> None:  # fmt: skip
        self._db.run(
            "INSERT INTO sessions(session_id, user_id, scope_key, conversation_key, persona, started_at,"
            " last_active_at) VALUES (?,?,?,?,?,?,?)",
            (session_id, user_id, scope_key, conversation_key, persona, ts(at), ts(at)),
        )

    def end(self, session_id: str, at: datetime | None = None) -> None:
        self._db.run("UPDATE sessions SET ended_at=? WHERE session_id=?", (ts(at), session_id))

    def touch(self, session_id: str, at: datetime) -> None:
        self._db.run("UPDATE sessions SET last_active_at=? WHERE session_id=?", (ts(at), session_id))


def _conversation(r: Row) -> Conversation:
    return Conversation(conversation_key=r[0], channel=r[1], conversation_id=r[2], kind=r[3], user_id=r[4],
                        persona=r[5], last_seen_at=parse_ts(r[6]))  # fmt: skip


class SqliteConversations:
    def __init__(self, db: Database) -> None:
        self._db = db

    def remember(self, *, conversation_key: str, channel: str, conversation_id: str, kind: str, user_id: str,
                 persona: str, at: datetime | None = None) -> None:  # fmt: skip
        """Record a conversation, or refresh its user and last-seen time (channel, id, kind and persona
        stay as first seen)."""
        self._db.run(
            "INSERT INTO conversations(conversation_key, channel, conversation_id, kind, user_id, persona,"
            " last_seen_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT(conversation_key) DO UPDATE SET"
            " user_id=excluded.user_id, last_seen_at=excluded.last_seen_at",
            (conversation_key, channel, conversation_id, kind, user_id, persona, ts(at)),
        )

    def get(self, conversation_key: str) -> Conversation | None:
        row = self._db.one(
            "SELECT conversation_key, channel, conversation_id, kind, user_id, persona, last_seen_at"
            " FROM conversations WHERE conversation_key=?",
            (conversation_key,),
        )
        return _conversation(row) if row else None

    def group_keys(self) -> list[str]:
        """Keys of every group conversation, in key order."""
        return [r[0] for r in self._db.all(
            "SELECT conversation_key FROM conversations WHERE kind='group' ORDER BY conversation_key")]  # fmt: skip


class SqliteDedupe:
    def __init__(self, db: Database) -> None:
        self._db = db

    def seen(self, channel: str, message_id: str) -> bool:
        return self._db.one("SELECT 1 FROM dedupe WHERE channel=? AND message_id=?", (channel, message_id)) is not None

    def mark_seen(self, channel: str, message_id: str, at: datetime | None = None) -> bool:
        """Record a dedupe key; False when it was already there (a redelivery)."""
        cur = self._db.run("INSERT OR IGNORE INTO dedupe(channel, message_id, created_at) VALUES (?,?,?)",
                           (channel, message_id, ts(at)))  # fmt: skip
        return cur.rowcount == 1

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` keys recorded before ``before`` (oldest first); how many went."""
        cur = self._db.run(
            "DELETE FROM dedupe WHERE rowid IN (SELECT rowid FROM dedupe WHERE created_at < ?"
            " ORDER BY created_at LIMIT ?)",
            (ts(before), limit),
        )
        return cur.rowcount
