"""Sessions: one live conversation per scope, a new one after an idle gap or ``/new``.

The scope of a direct conversation is the user (``user:<id>``), so a person who moves from Telegram
to the web chat continues the same session; a group conversation is its own scope
(``conv:<channel>:<id>``). Off-The-Record sessions live only in this process's memory: they are
never written to SQLite, files, indexes or jobs, and they vanish on ``/otr off`` or restart.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.config import Config
from gateway.state import State, parse_ts, ts
from gateway.types import ConversationKind, HistoryMessage, InboundMessage, Session, UserRef


def scope_key_for(user: UserRef, message: InboundMessage) -> str:
    if message.kind is ConversationKind.GROUP:
        return f"conv:{message.conversation_key}"
    return f"user:{user.user_id}"


@dataclass(slots=True)
class OtrSession:
    session: Session
    history: list[HistoryMessage] = field(default_factory=list)


class Sessions:
    def __init__(self, state: State, config: Config) -> None:
        self.state = state
        self.config = config
        self.otr: dict[str, OtrSession] = {}

    @property
    def idle_gap(self) -> timedelta:
        return timedelta(minutes=self.config.sessions.idle_minutes)

    def current(self, user: UserRef, message: InboundMessage, now: datetime) -> Session:
        """The live session for this message's scope, creating one when needed."""
        key = scope_key_for(user, message)
        otr = self.otr.get(key)
        if otr is not None:
            if now - otr.session.last_active_at > self.idle_gap:
                del self.otr[key]  # an abandoned OTR session ends silently; back to normal mode
            else:
                otr.session = replace(otr.session, last_active_at=now, is_new=False)
                return otr.session
        row = self.state.open_session(key)
        live = self._live(row, key, message, now)
        if live is not None:
            return live
        return self._start(user, message, key, now, previous=row["session_id"] if row else None)

    def peek(self, user: UserRef, message: InboundMessage, now: datetime) -> Session:
        """The session ``message`` would join, without creating or touching anything (``kith context``).

        When a new session would start, an unsaved one (``is_new``, id ``preview-...``) stands in.
        """
        key = scope_key_for(user, message)
        otr = self.otr.get(key)
        if otr is not None:
            return otr.session
        live = self._live(self.state.open_session(key), key, message, now)
        return live if live is not None else self._fresh(user, message, key, now, "preview-" + uuid.uuid4().hex)

    def _fresh(
        self, user: UserRef, message: InboundMessage, key: str, now: datetime, session_id: str, *, otr: bool = False
    ) -> Session:
        """A session starting now (not yet stored anywhere)."""
        return Session(
            session_id=session_id, user_id=user.user_id, scope=key, conversation_key=message.conversation_key,
            started_at=now, last_active_at=now, is_new=True, otr=otr,
            persona=self.config.personas.for_conversation(message.channel, message.conversation_key),
        )

    def _live(self, row: Any, key: str, message: InboundMessage, now: datetime) -> Session | None:
        if row is None or now - parse_ts(row["last_active_at"]) > self.idle_gap:
            return None
        # A session opened by /new has no turns yet: its first turn is still its start.
        fresh = self.state.one("SELECT 1 FROM turns WHERE session_id=? LIMIT 1", row["session_id"]) is None
        return Session(
            is_new=fresh,
            session_id=row["session_id"],
            user_id=row["user_id"],
            scope=key,
            conversation_key=message.conversation_key,
            started_at=parse_ts(row["started_at"]),
            last_active_at=now,
            persona=row["persona"],
        )

    def _start(
        self, user: UserRef, message: InboundMessage, key: str, now: datetime, previous: str | None
    ) -> Session:
        session = self._fresh(user, message, key, now, uuid.uuid4().hex)
        with self.state.tx() as db:
            if previous:
                db.execute("UPDATE sessions SET ended_at=? WHERE session_id=?", (ts(now), previous))
            db.execute(
                "INSERT INTO sessions(session_id, user_id, scope_key, conversation_key, persona, started_at,"
                " last_active_at) VALUES (?,?,?,?,?,?,?)",
                (session.session_id, user.user_id, key, message.conversation_key, session.persona,
                 ts(now), ts(now)),
            )
        return session

    def new(self, user: UserRef, message: InboundMessage, now: datetime) -> Session:
        """``/new``: end the current session (OTR or not) and start a fresh one."""
        key = scope_key_for(user, message)
        self.otr.pop(key, None)
        row = self.state.open_session(key)
        return self._start(user, message, key, now, previous=row["session_id"] if row else None)

    def start_otr(self, user: UserRef, message: InboundMessage, now: datetime) -> Session:
        key = scope_key_for(user, message)
        session = self._fresh(user, message, key, now, "otr-" + uuid.uuid4().hex, otr=True)
        self.otr[key] = OtrSession(session=session)
        return session

    def end_otr(self, user: UserRef, message: InboundMessage) -> bool:
        return self.otr.pop(scope_key_for(user, message), None) is not None

    def is_otr(self, user: UserRef, message: InboundMessage) -> bool:
        return scope_key_for(user, message) in self.otr

    def history(self, session: Session) -> tuple[HistoryMessage, ...]:
        limit = self.config.sessions.history_turns * 2
        if session.otr:
            otr = self.otr.get(session.scope)
            return tuple(otr.history[-limit:]) if otr and limit else ()
        if not limit:
            return ()
        # Turns a compaction summarised are replaced by its summary (a context section); the
        # transcript keeps them all.
        compacted = self.state.compaction(session.session_id)
        return tuple(
            HistoryMessage(role=r["role"], content=r["content"], timestamp=parse_ts(r["created_at"]),
                           turn_id=r["turn_id"])
            for r in self.state.history(session.session_id, limit, compacted["upto_seq"] if compacted else 0)
        )

    def record(
        self, session: Session, *, turn_id: str, user_text: str, reply_text: str, channel: str,
        speaker: str, at: datetime, reply_at: datetime | None = None, user_id: str = "",
    ) -> None:
        """Persist both sides of a turn (in memory only for OTR). ``user_id``: the speaker (in a group
        session, not necessarily the member whose message opened it)."""
        user_id = user_id or session.user_id
        reply_at = reply_at or datetime.now(UTC)
        if session.otr:
            otr = self.otr.get(session.scope)
            if otr is not None:
                otr.history.append(HistoryMessage(role="user", content=user_text, timestamp=at, turn_id=turn_id))
                otr.history.append(
                    HistoryMessage(role="assistant", content=reply_text, timestamp=reply_at, turn_id=turn_id)
                )
            return
        with self.state.tx() as db:
            db.executemany(
                "INSERT INTO turns(turn_id, session_id, user_id, role, content, channel, conversation_key,"
                " speaker, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (turn_id, session.session_id, user_id, "user", user_text, channel,
                     session.conversation_key, speaker, ts(at)),
                    (turn_id, session.session_id, user_id, "assistant", reply_text, channel,
                     session.conversation_key, "assistant", ts(reply_at)),
                ],
            )
            db.execute(
                "UPDATE sessions SET last_active_at=? WHERE session_id=?", (ts(reply_at), session.session_id)
            )
