"""Sessions, conversations and dedupe keys."""

from __future__ import annotations

import re
from datetime import datetime

from gateway.state.database import Database, Row
from gateway.state.records import Conversation, SessionSummary, StoredSession
from gateway.state.timestamps import parse_ts, read_ts, report_damaged, ts

_SESSION = "session_id, user_id, scope_key, conversation_key, persona, started_at, last_active_at, ended_at"


_Times = tuple[datetime, datetime, datetime | None]


def _times(what: str, key: str, started: object, active: object, ended: object) -> _Times | None:
    """A session row's three times, or None (reported) when one of them is damaged: the row is then
    skipped by its reader, as if it were not there (a turn starts a new session; lists leave it out)."""
    times = read_ts(started), read_ts(active), read_ts(ended) if ended is not None else None
    if times[0] is None or times[1] is None or (ended is not None and times[2] is None):
        report_damaged(what, key, next(v for v, t in zip((started, active, ended), times, strict=True) if t is None))
        return None
    return times[0], times[1], times[2]


def _session(r: Row) -> StoredSession | None:
    times = _times("session", r[0], r[5], r[6], r[7])
    if times is None:
        return None
    return StoredSession(session_id=r[0], user_id=r[1], scope_key=r[2], conversation_key=r[3], persona=r[4],
                         started_at=times[0], last_active_at=times[1], ended_at=times[2])  # fmt: skip


class Sessions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, session_id: str) -> StoredSession | None:
        row = self._db.one(f"SELECT {_SESSION} FROM sessions WHERE session_id=?", (session_id,))
        return _session(row) if row else None

    def scope_of(self, session_id: str) -> str | None:
        """The session's scope key (None: no such session); reads no timestamp, so a damaged row answers too."""
        row = self._db.one("SELECT scope_key FROM sessions WHERE session_id=?", (session_id,))
        return str(row[0]) if row else None

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

    def of_user(self, user_id: str, *, before: datetime | None = None, limit: int = 50) -> list[SessionSummary]:
        """The person's direct sessions (scope ``user:<id>``) started before ``before``, newest first;
        sessions without a message (opened by /new and left) are not listed."""
        rows = self._db.all(
            _SUMMARY + " AND s.started_at<? AND EXISTS (SELECT 1 FROM turns t WHERE t.session_id=s.session_id)"
            " ORDER BY s.started_at DESC LIMIT ?",
            (f"user:{user_id}", ts(before) if before else "9999", limit),
        )
        return [summary for r in rows if (summary := _summary(r)) is not None]

    def summaries(self, user_id: str, session_ids: list[str]) -> list[SessionSummary]:
        """The named sessions that are the person's direct ones, in the order given."""
        if not session_ids:
            return []
        marks = ",".join("?" * len(session_ids))
        rows = self._db.all(_SUMMARY + f" AND s.session_id IN ({marks})", (f"user:{user_id}", *session_ids))
        by_id = {r[0]: summary for r in rows if (summary := _summary(r)) is not None}
        return [by_id[i] for i in session_ids if i in by_id]

    def set_title(self, session_id: str, *, user_id: str, title: str, at: datetime) -> None:
        """Name a conversation (an empty title: back to its first message)."""
        if not title:
            self._db.run("DELETE FROM session_titles WHERE session_id=?", (session_id,))
            return
        self._db.run(
            "INSERT INTO session_titles(session_id, user_id, title, set_at) VALUES (?,?,?,?)"
            " ON CONFLICT(session_id) DO UPDATE SET title=excluded.title, set_at=excluded.set_at",
            (session_id, user_id, title, ts(at)),
        )

    def reopen(self, session_id: str, at: datetime) -> None:
        """Make an ended or idle session the open one of its scope again (continuing a past conversation):
        every other open session of the scope ends now, in the same transaction."""
        with self._db.tx():
            row = self._db.one("SELECT scope_key FROM sessions WHERE session_id=?", (session_id,))
            if row is None:
                return
            self._db.run("UPDATE sessions SET ended_at=? WHERE scope_key=? AND ended_at IS NULL AND session_id<>?",
                         (ts(at), row[0], session_id))  # fmt: skip
            self._db.run("UPDATE sessions SET ended_at=NULL, last_active_at=? WHERE session_id=?", (ts(at), session_id))


# A session's list entry: its first user message (title and channel) and its number of user messages,
# each one seek on turns_session (session_id, seq).
_SUMMARY = (
    "SELECT s.session_id, s.started_at, s.last_active_at, s.ended_at,"
    " (SELECT t.content FROM turns t WHERE t.session_id=s.session_id AND t.role='user' ORDER BY t.seq LIMIT 1),"
    " (SELECT t.channel FROM turns t WHERE t.session_id=s.session_id ORDER BY t.seq LIMIT 1),"
    " (SELECT count(*) FROM turns t WHERE t.session_id=s.session_id AND t.role='user'),"
    " (SELECT n.title FROM session_titles n WHERE n.session_id=s.session_id)"
    " FROM sessions s WHERE s.scope_key=?"
)
TITLE_CHARS = 80
# A file the first message carried is stored as a link into the person's tree (gateway/media/pipeline.py):
# the title names the file, not its path.
_MEDIA_LINK = re.compile(r"\[([^\]\n]{1,300})\]\(media/[^)\s]{1,400}\)")


def _summary(r: Row) -> SessionSummary | None:
    times = _times("session", r[0], r[1], r[2], r[3])
    if times is None:
        return None
    first = " ".join(_MEDIA_LINK.sub(r"\1", str(r[4] or "")).split())
    title = first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"
    return SessionSummary(session_id=r[0], started_at=times[0], last_active_at=times[1], ended_at=times[2],
                          title=r[7] or title, channel=str(r[5] or ""), turns=int(r[6]),
                          renamed=r[7] is not None)  # fmt: skip


def _conversation(r: Row) -> Conversation:
    return Conversation(conversation_key=r[0], channel=r[1], conversation_id=r[2], kind=r[3], user_id=r[4],
                        persona=r[5], last_seen_at=parse_ts(r[6]))  # fmt: skip


class Conversations:
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


class Dedupe:
    def __init__(self, db: Database) -> None:
        self._db = db

    def seen(self, channel: str, message_id: str) -> bool:
        return self._db.one("SELECT 1 FROM dedupe WHERE channel=? AND message_id=?", (channel, message_id)) is not None

    def mark_seen(self, channel: str, message_id: str, at: datetime | None = None) -> bool:
        """Record a dedupe key; False when it was already there (a redelivery)."""
        cur = self._db.run("INSERT INTO dedupe(channel, message_id, created_at) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                           (channel, message_id, ts(at)))  # fmt: skip
        return cur.rowcount == 1

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` keys recorded before ``before`` (oldest first); how many went."""
        cur = self._db.run(
            f"DELETE FROM dedupe WHERE {self._db.row_id} IN (SELECT {self._db.row_id} FROM dedupe WHERE created_at < ?"
            " ORDER BY created_at LIMIT ?)",
            (ts(before), limit),
        )
        return cur.rowcount
