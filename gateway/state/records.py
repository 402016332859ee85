"""The values that cross the storage seam: frozen dataclasses of plain Python values.

Backends build these from their rows; nothing else of a backend (rows, cursors, connections) ever
leaves it. Instants are aware UTC datetimes, except where a table has always kept ISO text that
callers show as is (the access tables: ``PairingRequest``, ``Invite``, ``QueueStats``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# ------------------------------------------------------------------------------------------- users


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    user_id: str
    display_name: str
    timezone: str
    created_at: datetime
    tier: int | None = None  # the person's own context tier (1-4); None: the configured default


@dataclass(frozen=True, slots=True, kw_only=True)
class Account:
    """One (channel, account id) of a user, as ``identities`` knows it."""

    channel: str
    account_id: str
    display_name: str


# ---------------------------------------------------------------------------------------- sessions


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSession:
    session_id: str
    user_id: str
    scope_key: str  # user:<id> | conv:<conversation key>
    conversation_key: str
    persona: str
    started_at: datetime
    last_active_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """A session as a list of past conversations shows it: its first message as a title, its size."""

    session_id: str
    channel: str  # the channel of its first message ("" when it has none)
    started_at: datetime
    last_active_at: datetime
    ended_at: datetime | None
    title: str  # the name the person gave it, else the first user message cut to a line
    turns: int  # user messages
    renamed: bool = False  # the title is the person's own


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnContext:
    """What the model saw for one stored turn: section names, token counts, what was trimmed, as the
    JSON text the turn pipeline wrote (``gateway.turn.record``)."""

    turn_id: str
    user_id: str
    session_id: str
    created_at: datetime
    data: str


# ------------------------------------------------------------------------------------- transcript


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptEntry:
    """One side of a turn to store (``role`` user or assistant)."""

    turn_id: str
    session_id: str
    user_id: str
    role: str
    content: str
    channel: str
    conversation_key: str
    speaker: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptRow:
    """A stored transcript row; ``seq`` orders the whole transcript."""

    seq: int
    turn_id: str
    session_id: str
    user_id: str
    role: str
    content: str
    channel: str
    conversation_key: str
    speaker: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class PagedRow:
    """A transcript row as a person's message list shows it; ``created_at`` is None when the stored
    value is not a timestamp (a damaged row): the message is still shown."""

    seq: int
    turn_id: str
    role: str
    content: str
    channel: str
    speaker: str
    created_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryRow:
    """What the prompt's history needs of a row (the turn path reads these every turn)."""

    role: str
    content: str
    created_at: datetime
    turn_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedTurn:
    """A user message with its reply (``reply`` None when none was stored), the session's scope and
    the speaker's timezone: what the session log writes."""

    seq: int
    turn_id: str
    session_id: str
    user_id: str
    content: str
    channel: str
    conversation_key: str
    speaker: str
    created_at: datetime | None  # None: the stored value is not a timestamp (the reconciler skips the row)
    scope_key: str
    timezone: str
    reply: str | None
    reply_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """A session's compacted prefix: turns up to ``upto_seq`` live on as ``summary``."""

    upto_seq: int
    summary: str
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """How to reach a conversation later (proactive messages)."""

    conversation_key: str
    channel: str
    conversation_id: str
    kind: str  # "dm" | "group"
    user_id: str
    persona: str
    last_seen_at: datetime


# ----------------------------------------------------------------------------------- link requests


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRequestRecord:
    """A ``/link`` code and, once redeemed, the request both sides confirm (``gateway.identity.linking``)."""

    code: str
    issuer_user: str
    issuer_channel: str
    issuer_account: str
    issuer_conversation: str
    issuer_name: str
    issuer_token: str
    issuer_ok: bool
    redeemer_user: str | None
    redeemer_channel: str | None
    redeemer_account: str | None  # None until the code is redeemed
    redeemer_conversation: str
    redeemer_name: str
    redeemer_token: str
    redeemer_ok: bool
    created_at: datetime
    expires_at: datetime


# ------------------------------------------------------------------------------------------ access


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingRequest:
    code: str
    channel: str
    account_id: str
    display_name: str
    created_at: str
    expires_at: str
    requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Invite:
    code: str
    channel: str  # "" = any channel
    note: str
    created_at: str
    expires_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStats:
    channel: str
    pending: int
    refused: int
    evicted: int
    over_quota: int
    since: str
    last_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovedAccount:
    channel: str
    account_id: str
    display_name: str
    approved_at: str
    via: str  # pairing | invite


# ---------------------------------------------------------------------------------- knowledge graph


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    id: int
    user_id: str  # the scope: a user id or "channel:<key>"
    subject: str
    predicate: str
    object: str
    valid_from: datetime
    valid_until: datetime | None
    confidence: float
    source_type: str
    source_ref: str
    created_at: datetime

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "valid_from": self.valid_from.isoformat(),
            "valid_until": self.valid_until.isoformat() if self.valid_until else None,
            "confidence": self.confidence,
            "source_type": self.source_type,
            "source_ref": self.source_ref,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class NewFact:
    """A fact row to insert; ``*_key`` are the normalised match forms, ``replay_key`` the idempotency
    key (None: no source to tell a replay by)."""

    user_id: str
    subject: str
    subject_key: str
    predicate: str
    object: str
    object_key: str
    valid_from: datetime
    valid_until: datetime | None
    confidence: float
    source_type: str
    source_ref: str
    replay_key: str | None
    created_at: datetime


# ------------------------------------------------------------------------------------ job progress


@dataclass(frozen=True, slots=True, kw_only=True)
class SleepRun:
    scope: str
    slot: str
    day: str
    first_seq: int
    upto_seq: int
    turns: int
    output: str
    stage: str  # extracted | applied | done
    detail: str


# ------------------------------------------------------------------------- web sign-in (issue 14)


@dataclass(frozen=True, slots=True, kw_only=True)
class SigninGrant:
    """A one-time sign-in token, as redeemed (the token itself is never stored, only its hash)."""

    user_id: str
    operator: bool
    issued_by: str
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSession:
    """A browser's session behind the ``kith_session`` cookie (stored by the cookie's hash)."""

    user_id: str
    operator: bool
    via: str  # "link" (a one-time sign-in link) | "local" (loopback without server.token)
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """A person's key for the OpenAI-compatible endpoint (stored by the key's hash; the key is shown once)."""

    key_id: str  # the public part of the key: names it in listings and ``--revoke``
    user_id: str
    label: str
    created_at: datetime
    last_used_at: datetime | None
