"""Sessions: one live conversation per scope, a new one after an idle gap or ``/new``.

The scope of a direct conversation is the user (``user:<id>``), so a person who moves from Telegram
to the web chat continues the same session; a group conversation is its own scope
(``conv:<channel>:<id>``). Off-The-Record sessions live only in this process's memory: they are
never written to SQLite, files, indexes or jobs, and they vanish on ``/otr off`` or restart.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from gateway.config import Config
from gateway.personas.which import resolve_for
from gateway.state import Compaction, State, StorageError, StoredSession, TranscriptEntry
from gateway.types import ConversationKind, HistoryMessage, InboundMessage, Session, StashKey, Turn, UserRef

log = logging.getLogger("kith.sessions")
_MAX_AWAITING = 10_000


def scope_key_for(user: UserRef, message: InboundMessage) -> str:
    if message.kind is ConversationKind.GROUP:
        return f"conv:{message.conversation_key}"
    return f"user:{user.user_id}"


# (session id, its compaction) as read in this turn.
COMPACTION: StashKey[tuple[str, Compaction | None]] = StashKey()


def compaction_in_turn(state: State, turn: Turn | None, session_id: str) -> Compaction | None:
    """The session's compaction, read once per turn: the history, the summary section and the
    after-turn check all ask. One advanced by a job during the turn is seen at the next turn (the
    after-turn check then counts a few turns more than it should: the job finds nothing to do)."""
    if turn is not None and (hit := turn.stash.get(COMPACTION)) is not None and hit[0] == session_id:
        return hit[1]
    row = state.compactions.get(session_id)
    if turn is not None:
        turn.stash[COMPACTION] = (session_id, row)
    return row


@dataclass(slots=True)
class OtrSession:
    session: Session
    history: list[HistoryMessage] = field(default_factory=list)


class Sessions:
    def __init__(self, state: State, config: Config) -> None:
        self.state = state
        self.config = config
        self.otr: dict[str, OtrSession] = {}
        # turn id -> session id of messages stored by ``record_message`` whose reply is not stored yet
        self._awaiting_reply: OrderedDict[str, str] = OrderedDict()
        # Sessions known to hold a whole turn (a reply): such a session keeps turns (a failed model call
        # takes back only its own message; erasing a person deletes the session with them), so "is it
        # still fresh" needs no query for it again, on any node.
        self._with_turns: OrderedDict[str, None] = OrderedDict()

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
        stored = self.state.sessions.open_in(key)
        live = self._live(stored, key, message, now)
        # Sessions are per persona: one the person switched away from (/persona) ends here.
        if live is not None and live.persona == self.persona(user, message):
            return live
        return self._start(user, message, key, now, previous=stored.session_id if stored else None)

    def peek(self, user: UserRef, message: InboundMessage, now: datetime) -> Session:
        """The session ``message`` would join, without creating or touching anything (``kith context``).

        When a new session would start, an unsaved one (``is_new``, id ``preview-...``) stands in.
        """
        key = scope_key_for(user, message)
        otr = self.otr.get(key)
        if otr is not None:
            return otr.session
        live = self._live(self.state.sessions.open_in(key), key, message, now)
        if live is not None and live.persona == self.persona(user, message):
            return live
        return self._fresh(user, message, key, now, "preview-" + uuid.uuid4().hex)

    def _fresh(
        self, user: UserRef, message: InboundMessage, key: str, now: datetime, session_id: str, *, otr: bool = False
    ) -> Session:
        """A session starting now (not yet stored anywhere)."""
        return Session(
            session_id=session_id, user_id=user.user_id, scope=key, conversation_key=message.conversation_key,
            started_at=now, last_active_at=now, is_new=True, otr=otr,
            persona=self.persona(user, message),
        )

    def persona(self, user: UserRef, message: InboundMessage) -> str:
        """The persona this message's conversation talks to now (docs/personas.md, "Which persona")."""
        return resolve_for(self.state, self.config, user.user_id, message.conversation_key,
                           group=message.kind is ConversationKind.GROUP)

    def _live(self, stored: StoredSession | None, key: str, message: InboundMessage, now: datetime) -> Session | None:
        if stored is None or now - stored.last_active_at > self.idle_gap:
            return None
        # A session opened by /new has no turns yet: its first turn is still its start.
        fresh = stored.session_id not in self._with_turns and not self.state.turns.has_turns(stored.session_id)
        return Session(
            is_new=fresh,
            session_id=stored.session_id,
            user_id=stored.user_id,
            scope=key,
            conversation_key=message.conversation_key,
            started_at=stored.started_at,
            last_active_at=now,
            persona=stored.persona,
        )

    def _start(
        self, user: UserRef, message: InboundMessage, key: str, now: datetime, previous: str | None
    ) -> Session:
        session = self._fresh(user, message, key, now, uuid.uuid4().hex)
        with self.state.tx():
            if previous:
                self.state.sessions.end(previous, now)
            self.state.sessions.create(session.session_id, user_id=user.user_id, scope_key=key,
                                       conversation_key=message.conversation_key, persona=session.persona, at=now)
        return session

    def new(self, user: UserRef, message: InboundMessage, now: datetime) -> Session:
        """``/new``: end the current session (OTR or not) and start a fresh one."""
        key = scope_key_for(user, message)
        self.otr.pop(key, None)
        stored = self.state.sessions.open_in(key)
        return self._start(user, message, key, now, previous=stored.session_id if stored else None)

    def start_otr(self, user: UserRef, message: InboundMessage, now: datetime) -> Session:
        key = scope_key_for(user, message)
        session = self._fresh(user, message, key, now, "otr-" + uuid.uuid4().hex, otr=True)
        self.otr[key] = OtrSession(session=session)
        return session

    def end_otr(self, user: UserRef, message: InboundMessage) -> bool:
        return self.otr.pop(scope_key_for(user, message), None) is not None

    def is_otr(self, user: UserRef, message: InboundMessage) -> bool:
        return scope_key_for(user, message) in self.otr

    def history(self, session: Session, turn: Turn | None = None) -> tuple[HistoryMessage, ...]:
        limit = self.config.sessions.history_turns * 2
        if session.otr:
            otr = self.otr.get(session.scope)
            return tuple(otr.history[-limit:]) if otr and limit else ()
        if not limit:
            return ()
        # Turns a compaction summarised are replaced by its summary (a context section); the
        # transcript keeps them all.
        compacted = compaction_in_turn(self.state, turn, session.session_id)
        return tuple(
            HistoryMessage(role=r.role, content=r.content, timestamp=r.created_at, turn_id=r.turn_id)
            for r in self.state.turns.history(session.session_id, limit, compacted.upto_seq if compacted else 0)
        )

    def record_message(
        self, session: Session, *, turn_id: str, text: str, channel: str, speaker: str, at: datetime,
        user_id: str = "",
    ) -> None:
        """Persist the user's side of a turn before the model is called, so a crash during the call
        keeps the message; ``record`` completes the turn with the reply. Nothing for OTR. A failing
        write (a full disk) is logged and left to ``record``, which writes both sides then."""
        if session.otr:
            return
        # Two single statements, no transaction around them (BEGIN and COMMIT are two statements more
        # a turn): the message is what must survive a crash, and the session's activity is written
        # again with the reply.
        try:
            self.state.turns.append(TranscriptEntry(
                turn_id=turn_id, session_id=session.session_id, user_id=user_id or session.user_id, role="user",
                content=text, channel=channel, conversation_key=session.conversation_key, speaker=speaker,
                created_at=at,
            ))  # fmt: skip
        except StorageError as exc:
            log.warning("could not store the message of turn %s before the model call: %s", turn_id, exc)
            return
        self._awaiting_reply[turn_id] = session.session_id
        while len(self._awaiting_reply) > _MAX_AWAITING:  # turns cancelled mid-call never complete
            self._awaiting_reply.popitem(last=False)
        try:
            self.state.sessions.touch(session.session_id, at)
        except StorageError as exc:
            log.warning("could not mark session %s active before the model call: %s", session.session_id, exc)

    def discard_message(self, session: Session, turn_id: str) -> None:
        """The model call failed and the person was told so: the turn did not happen (they send it
        again), so the message stored by ``record_message`` goes, as if it had never been stored."""
        if self._awaiting_reply.pop(turn_id, None) is None:
            return
        try:
            self.state.turns.discard_message(session.session_id, turn_id)
        except StorageError as exc:
            log.warning("could not take back the message of failed turn %s: %s", turn_id, exc)

    def record(
        self, session: Session, *, turn_id: str, user_text: str, reply_text: str, channel: str,
        speaker: str, at: datetime, reply_at: datetime | None = None, user_id: str = "",
    ) -> None:
        """Persist both sides of a turn (in memory only for OTR); only the reply when ``record_message``
        stored the message already. ``user_id``: the speaker (in a group session, not necessarily the
        member whose message opened it)."""
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
        rows = [TranscriptEntry(turn_id=turn_id, session_id=session.session_id, user_id=user_id, role="assistant",
                                content=reply_text, channel=channel, conversation_key=session.conversation_key,
                                speaker="assistant", created_at=reply_at)]  # fmt: skip
        if self._awaiting_reply.get(turn_id) != session.session_id:
            rows.insert(0, TranscriptEntry(turn_id=turn_id, session_id=session.session_id, user_id=user_id,
                                           role="user", content=user_text, channel=channel,
                                           conversation_key=session.conversation_key, speaker=speaker,
                                           created_at=at))  # fmt: skip
        if len(rows) == 1:
            # The message is stored: the reply is one row, and the session's activity need not commit
            # with it (no transaction: two statements a turn less).
            self.state.turns.append(*rows)
            self._awaiting_reply.pop(turn_id, None)
            self.state.sessions.touch(session.session_id, reply_at)
        else:
            with self.state.tx():  # both sides of the turn, or neither
                self.state.turns.append(*rows)
                self.state.sessions.touch(session.session_id, reply_at)
        self._awaiting_reply.pop(turn_id, None)
        self._with_turns[session.session_id] = None
        self._with_turns.move_to_end(session.session_id)
        while len(self._with_turns) > _MAX_AWAITING:
            self._with_turns.popitem(last=False)
