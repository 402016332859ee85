"""The transcript (``turns``), what the model saw per turn, and compactions.

Full-text search over the transcript has no common SQL: each driver implements ``Turns``'s two
search methods (SQLite's FTS5 table, PostgreSQL's GIN index).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

from gateway.state.database import Database, Row
from gateway.state.records import (
    Compaction,
    HistoryRow,
    LoggedTurn,
    PagedRow,
    TranscriptEntry,
    TranscriptRow,
    TurnContext,
)
from gateway.state.timestamps import parse_ts, read_ts, report_damaged, ts

_ROW = (
    "t.seq, t.turn_id, t.session_id, t.user_id, t.role, t.content, t.channel, t.conversation_key, t.speaker,"
    " t.created_at"
)


def _rows(rows: list[Row]) -> list[TranscriptRow]:
    """The rows as records; one whose stored time is damaged is skipped and reported (``report_damaged``)."""
    out = []
    for r in rows:
        at = read_ts(r[9])
        if at is None:
            report_damaged("transcript row", f"{r[2]}/{r[1]} (seq {r[0]})", r[9])
            continue
        out.append(TranscriptRow(seq=r[0], turn_id=r[1], session_id=r[2], user_id=r[3], role=r[4], content=r[5],
                                 channel=r[6], conversation_key=r[7], speaker=r[8], created_at=at))  # fmt: skip
    return out


class Turns(ABC):
    def __init__(self, db: Database) -> None:
        self._db = db

    # --------------------------------------------------------------------------------- writes
    def append(self, *entries: TranscriptEntry) -> None:
        self._db.many(
            "INSERT INTO turns(turn_id, session_id, user_id, role, content, channel, conversation_key, speaker,"
            " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            [(e.turn_id, e.session_id, e.user_id, e.role, e.content, e.channel, e.conversation_key, e.speaker,
              ts(e.created_at)) for e in entries],
        )  # fmt: skip

    def discard_message(self, session_id: str, turn_id: str) -> None:
        """Delete the user's side of a turn (its model call failed; the person sends it again)."""
        self._db.run("DELETE FROM turns WHERE session_id=? AND turn_id=? AND role='user'", (session_id, turn_id))

    # ------------------------------------------------------------------------------ the turn path
    def has_turns(self, session_id: str) -> bool:
        return self._db.one("SELECT 1 FROM turns WHERE session_id=? LIMIT 1", (session_id,)) is not None

    def history(self, session_id: str, limit: int, after_seq: int = 0) -> list[HistoryRow]:
        """The session's last ``limit`` rows after ``after_seq``, oldest first."""
        rows = self._db.all(
            "SELECT role, content, created_at, turn_id FROM turns WHERE session_id=? AND seq>?"
            " ORDER BY seq DESC LIMIT ?",
            (session_id, after_seq, limit),
        )
        rows.reverse()
        out = []
        for r in rows:  # a damaged row is left out of the prompt (and reported), never the turn's end
            at = read_ts(r[2])
            if at is None:
                report_damaged("transcript row", f"{session_id}/{r[3]}", r[2])
                continue
            out.append(HistoryRow(role=r[0], content=r[1], created_at=at, turn_id=r[3]))
        return out

    def roles_of(self, session_id: str, turn_id: str) -> set[str]:
        """The roles (``user``, ``assistant``) stored for one turn: what a write-back still has to add."""
        rows = self._db.all("SELECT role FROM turns WHERE session_id=? AND turn_id=?", (session_id, turn_id))
        return {r[0] for r in rows}

    def last_seq(self) -> int:
        row = self._db.one("SELECT max(seq) FROM turns")
        return int(row[0]) if row and row[0] is not None else 0

    # ------------------------------------------------------------------------------- the session log
    def logged(self, *, after_seq: int, upto_seq: int, since: datetime, limit: int) -> list[LoggedTurn]:
        """User messages in ``seq`` order, each with its reply (None when none was stored), the
        session's scope and the speaker's timezone."""
        rows = self._db.all(
            "SELECT x.*, r.content AS reply, r.created_at AS reply_at FROM ("
            " SELECT u.seq, u.turn_id, u.session_id, u.user_id, u.content, u.channel, u.conversation_key,"
            " u.speaker, u.created_at, s.scope_key, coalesce(usr.timezone, '') AS timezone,"
            " (SELECT a.seq FROM turns a WHERE a.session_id=u.session_id AND a.seq>u.seq AND a.turn_id=u.turn_id"
            "  AND a.role='assistant' ORDER BY a.seq LIMIT 1) AS reply_seq"
            " FROM turns u JOIN sessions s ON s.session_id=u.session_id LEFT JOIN users usr ON usr.user_id=u.user_id"
            " WHERE u.role='user' AND u.seq>? AND u.seq<=? AND u.created_at>=? ORDER BY u.seq LIMIT ?"
            ") x LEFT JOIN turns r ON r.seq=x.reply_seq ORDER BY x.seq",
            (after_seq, upto_seq, ts(since), limit),
        )
        # A damaged time (``created_at`` None) is the reconciler's to report; a damaged reply time leaves
        # the reply without one, as for a reply never stored with a time.
        return [
            LoggedTurn(seq=r[0], turn_id=r[1], session_id=r[2], user_id=r[3], content=r[4], channel=r[5],
                       conversation_key=r[6], speaker=r[7], created_at=read_ts(r[8]), scope_key=r[9], timezone=r[10],
                       reply=r[12], reply_at=read_ts(r[13]) if r[12] is not None else None)
            for r in rows
        ]  # fmt: skip

    # ------------------------------------------------------------------------ background jobs' reads
    def after(self, session_id: str, after_seq: int = 0, *, limit: int | None = None) -> list[TranscriptRow]:
        """The session's rows after ``after_seq``, oldest first (at most ``limit``)."""
        sql = f"SELECT {_ROW} FROM turns t WHERE t.session_id=? AND t.seq>? ORDER BY t.seq"
        args: tuple[object, ...] = (session_id, after_seq)
        if limit is not None:
            sql, args = sql + " LIMIT ?", (*args, limit)
        return _rows(self._db.all(sql, args))

    def size_after(self, session_id: str, after_seq: int) -> tuple[int, int]:
        """(rows, characters of content) of the session after ``after_seq``: one indexed count."""
        row = self._db.one(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(content)), 0) FROM turns WHERE session_id=? AND seq>?",
            (session_id, after_seq),
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def count_after(self, session_id: str, after_seq: int, *, role: str) -> int:
        row = self._db.one("SELECT count(*) FROM turns WHERE session_id=? AND seq>? AND role=?",
                           (session_id, after_seq, role))  # fmt: skip
        return int(row[0]) if row else 0

    def latest_message(self, session_id: str) -> str | None:
        """The turn id of the session's latest user message."""
        row = self._db.one(
            "SELECT turn_id FROM turns WHERE session_id=? AND role='user' ORDER BY seq DESC LIMIT 1", (session_id,)
        )
        return row[0] if row else None

    def in_scope(self, scope_key: str, *, after_seq: int, before: datetime, limit: int) -> list[TranscriptRow]:
        """Rows of the sessions of ``scope_key`` after ``after_seq`` and strictly before ``before``."""
        rows = self._db.all(
            f"SELECT {_ROW} FROM turns t JOIN sessions s ON s.session_id = t.session_id "
            "WHERE s.scope_key = ? AND t.seq > ? AND t.created_at < ? ORDER BY t.seq LIMIT ?",
            (scope_key, after_seq, ts(before), limit),
        )
        return _rows(rows)

    def any_in_scope_after(self, scope_key: str, after_seq: int) -> bool:
        row = self._db.one(
            "SELECT 1 FROM turns t JOIN sessions s ON s.session_id=t.session_id WHERE s.scope_key=? AND t.seq>? "
            "LIMIT 1",
            (scope_key, after_seq),
        )
        return row is not None

    def first_in_scope(self, scope_key: str) -> datetime | None:
        """When the oldest row of the scope's sessions was stored (None: no rows)."""
        row = self._db.one(
            "SELECT min(t.created_at) FROM turns t JOIN sessions s ON s.session_id = t.session_id"
            " WHERE s.scope_key=?",
            (scope_key,),
        )
        return read_ts(row[0]) if row and row[0] else None  # (all damaged: as if none)

    def recent_speakers(self, channel: str, conversation_key: str, limit: int) -> list[str]:
        """Account ids (on ``channel``) of the conversation's last ``limit`` distinct speakers, latest first."""
        rows = self._db.all(
            "SELECT i.account_id FROM turns t JOIN identities i ON i.user_id=t.user_id AND i.channel=?"
            " WHERE t.conversation_key=? AND t.role='user' GROUP BY i.account_id ORDER BY MAX(t.seq) DESC LIMIT ?",
            (channel, conversation_key, limit),
        )
        return [r[0] for r in rows]


    # ---------------------------------------------------------------------- the person's own views
    def page(self, session_id: str, *, before_seq: int | None = None, limit: int = 50) -> list[PagedRow]:
        """Up to ``limit`` rows of the session before ``before_seq`` (default: its end), oldest first; a
        row whose stored time is damaged is shown without one rather than failing the page."""
        rows = self._db.all(
            "SELECT t.seq, t.turn_id, t.role, t.content, t.channel, t.speaker, t.created_at FROM turns t"
            " WHERE t.session_id=? AND t.seq<? ORDER BY t.seq DESC LIMIT ?",
            (session_id, before_seq if before_seq is not None else 2**62, limit),
        )
        rows.reverse()
        return [PagedRow(seq=r[0], turn_id=r[1], role=r[2], content=r[3], channel=r[4], speaker=r[5],
                         created_at=read_ts(r[6])) for r in rows]  # fmt: skip

    @abstractmethod
    def search_sessions(self, user_id: str, text: str, *, limit: int = 20) -> list[str]:
        """Ids of the person's direct sessions whose messages hold every word of ``text`` (full text:
        case and diacritics folded), best match first. ``text`` is plain words, no query syntax."""

    @abstractmethod
    def rows_with_words(self, user_id: str, text: str, *, limit: int = 2000) -> list[tuple[int, str]]:
        """(seq, content) of the person's direct-conversation rows holding every word of ``text`` (full
        text: case and diacritics folded); the caller checks the exact phrase."""

    def set_content(self, user_id: str, seq: int, content: str) -> bool:
        """Rewrite one row of the person's transcript (the full-text index follows it). The old row
        version goes at the next ``people.scrub(merge_search=True)``."""
        cur = self._db.run("UPDATE turns SET content=? WHERE seq=? AND user_id=?", (content, seq, user_id))
        return cur.rowcount > 0

    def delete_session(self, session_id: str) -> int:
        """Delete a conversation (the chat's History, ``gateway.memory.edit.drop_session``): its transcript
        rows (the full-text index follows), what the model saw per turn, its compaction, the memory
        writer's place in it, its title and the session itself, in one transaction. Rows deleted from
        ``turns``. The old text goes from the full-text segments at the next ``people.scrub(merge_search=True)``."""
        with self._db.tx():
            cur = self._db.run("DELETE FROM turns WHERE session_id=?", (session_id,))
            for table in ("turn_contexts", "compactions", "bg_writer", "session_titles", "sessions"):
                self._db.run(f"DELETE FROM {table} WHERE session_id=?", (session_id,))
        return cur.rowcount


class TurnContexts:
    """What the model saw per turn (``gateway.turncontext`` writes it; the HTTP API reads it)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, turn_id: str, *, user_id: str, session_id: str, at: datetime, data: str) -> None:
        self._db.run(
            "INSERT INTO turn_contexts(turn_id, user_id, session_id, created_at, data) VALUES (?,?,?,?,?)"
            " ON CONFLICT(turn_id) DO UPDATE SET user_id=excluded.user_id, session_id=excluded.session_id,"
            " created_at=excluded.created_at, data=excluded.data",
            (turn_id, user_id, session_id, ts(at), data),
        )

    def get(self, turn_id: str) -> TurnContext | None:
        row = self._db.one(
            "SELECT turn_id, user_id, session_id, created_at, data FROM turn_contexts WHERE turn_id=?", (turn_id,)
        )
        if row is None:
            return None
        return TurnContext(turn_id=row[0], user_id=row[1], session_id=row[2], created_at=parse_ts(row[3]),
                           data=row[4])  # fmt: skip

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` records older than ``before``, oldest first; how many went."""
        cur = self._db.run(
            "DELETE FROM turn_contexts WHERE turn_id IN (SELECT turn_id FROM turn_contexts WHERE created_at<?"
            " ORDER BY created_at LIMIT ?)",
            (ts(before), limit),
        )
        return cur.rowcount


class Compactions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, session_id: str) -> Compaction | None:
        """The session's compacted prefix: turns up to ``upto_seq`` live on as ``summary``."""
        row = self._db.one("SELECT upto_seq, summary, updated_at FROM compactions WHERE session_id=?", (session_id,))
        return Compaction(upto_seq=row[0], summary=row[1], updated_at=parse_ts(row[2])) if row else None

    def advance(self, session_id: str, *, upto_seq: int, summary: str, at: datetime) -> None:
        """Record a compaction; it never moves backwards (a late rerun of an older one is ignored)."""
        self._db.run(
            "INSERT INTO compactions(session_id, upto_seq, summary, updated_at) VALUES (?,?,?,?)"
            " ON CONFLICT(session_id) DO UPDATE SET upto_seq=excluded.upto_seq, summary=excluded.summary,"
            " updated_at=excluded.updated_at WHERE excluded.upto_seq > compactions.upto_seq",
            (session_id, upto_seq, summary, ts(at)),
        )
