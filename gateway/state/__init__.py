"""The storage seam: every table kith keeps, behind named methods grouped by concept.

``State`` (``interface.py``) is what the rest of kith sees: one store per concept (users,
identities, link requests, sessions, turns, compactions, conversations, dedupe keys, access, the
knowledge graph, job progress), each a Protocol whose methods take and return plain values and the
frozen dataclasses of ``records.py``, plus one transaction helper, ``State.tx()``. The SQLite backend
(``sqlite/``: one connection per database file, versioned migrations) is the only place in kith that
holds SQL. ``open_state`` opens a database; on the event loop use ``open_state_async``, which opens it
in a worker thread (opening may wait for another process: the WAL switch, a migration).

Imports: the standard library and this package only; nothing else of kith (everything else imports
this).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from gateway.state.errors import SchemaError, StorageError
from gateway.state.interface import (
    ApiKeyStore,
    CompactionStore,
    ConversationStore,
    DedupeStore,
    IdentityStore,
    KnowledgeStore,
    LinkRequestStore,
    PairingStore,
    PeopleStore,
    ProgressStore,
    SessionStore,
    State,
    TurnContextStore,
    TurnStore,
    UserStore,
    WebSessionStore,
)
from gateway.state.records import (
    Account,
    ApiKey,
    ApprovedAccount,
    Compaction,
    Conversation,
    Fact,
    HistoryRow,
    Invite,
    LinkRequestRecord,
    LoggedTurn,
    NewFact,
    PairingRequest,
    QueueStats,
    SessionSummary,
    SigninGrant,
    SleepRun,
    StoredSession,
    TranscriptEntry,
    TranscriptRow,
    TurnContext,
    User,
    WebSession,
)
from gateway.state.sqlite import open_sqlite
from gateway.state.sqlite.migrations import COMPONENTS
from gateway.state.timestamps import parse_ts, ts

__all__ = [
    "COMPONENTS", "Account", "ApiKey", "ApiKeyStore", "ApprovedAccount", "Compaction", "CompactionStore",
    "Conversation",
    "ConversationStore", "DedupeStore", "Fact", "HistoryRow", "IdentityStore", "Invite", "KnowledgeStore",
    "LinkRequestRecord", "LinkRequestStore", "LoggedTurn", "NewFact", "PairingRequest", "PairingStore",
    "PeopleStore", "ProgressStore", "QueueStats", "SchemaError", "SessionStore", "SessionSummary",
    "SigninGrant", "SleepRun", "State", "StorageError", "StoredSession", "TranscriptEntry", "TranscriptRow",
    "TurnContext", "TurnContextStore", "TurnStore", "User", "UserStore",
    "WebSession", "WebSessionStore", "open_state", "open_state_async", "parse_ts", "ts",
]  # fmt: skip


def open_state(path: Path, *, components: Iterable[str] = COMPONENTS) -> State:
    """Open the database at ``path``, creating it and applying missing migrations. Blocking.

    ``components``: the parts of the schema this opener needs (``state``, ``knowledge``); a file that
    holds only a knowledge graph is opened with ``("knowledge",)``."""
    return open_sqlite(Path(path), components)


async def open_state_async(path: Path, *, components: Iterable[str] = COMPONENTS) -> State:
    """``open_state`` in a worker thread, so the event loop never waits on the file: a fresh database
    switched to WAL by two processes at once, or a migration, can take a while."""
    return await asyncio.to_thread(open_state, path, components=tuple(components))
