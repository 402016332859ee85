"""The storage seam: every table kith keeps, behind named methods grouped by concept.

``State`` (``interface.py``) is what the rest of kith sees: one store per concept (users,
identities, link requests, sessions, turns, compactions, conversations, dedupe keys, access, the
knowledge graph, each background job's progress), each a Protocol whose methods take and return plain
values and the frozen dataclasses of ``records.py``, plus one transaction helper, ``State.tx()``.
The stores are written once (``stores/``) against a small database Protocol (``database.py``) that
both drivers implement: SQLite (``sqlite/``: one connection per database file) and PostgreSQL
(``postgres/``: a connection pool); each driver folder holds only its driver, its dialect, its
migrations and its own forms of what has no common SQL (full text, the schema catalogue, erase).
These are the only places in kith that hold SQL. ``open_state`` opens a SQLite file,
``open_state_url`` a PostgreSQL database, and ``open_configured`` whichever the config's ``state.url``
names (unset: ``<data_dir>/state.sqlite``); on the event loop use the ``_async`` forms, which open in a
worker thread (opening may wait for another process: the WAL switch, a migration, a server).
``transfer`` moves whole tables between them.

Imports: the standard library and this package only; nothing else of kith (everything else imports
this).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gateway.state.errors import SchemaError, StorageError
from gateway.state.interface import (
    ApiKeyStore,
    CompactionStore,
    ConversationStore,
    DedupeStore,
    DistillRunStore,
    IdentityStore,
    KnowledgeStore,
    LinkRequestStore,
    PairingStore,
    PeopleStore,
    RetentionStore,
    SessionStore,
    SleepRunStore,
    State,
    TurnContextStore,
    TurnStore,
    UserStore,
    WatermarkStore,
    WebSessionStore,
    WriterProgressStore,
)
from gateway.state.migrate import COMPONENTS
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
    PagedRow,
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
from gateway.state.timestamps import parse_ts, ts

__all__ = [
    "COMPONENTS", "Account", "ApiKey", "ApiKeyStore", "ApprovedAccount", "Compaction", "CompactionStore",
    "Conversation", "ConversationStore", "DedupeStore", "DistillRunStore", "Fact", "HistoryRow", "IdentityStore",
    "Invite", "KnowledgeStore", "LinkRequestRecord", "LinkRequestStore", "LoggedTurn", "NewFact", "PagedRow",
    "PairingRequest", "PairingStore", "PeopleStore", "QueueStats", "RetentionStore", "SchemaError", "SessionStore",
    "SessionSummary", "SigninGrant", "SleepRun", "SleepRunStore", "State", "StorageError", "StoredSession",
    "TranscriptEntry", "TranscriptRow", "TurnContext", "TurnContextStore", "TurnStore", "User", "UserStore",
    "WatermarkStore", "WebSession", "WebSessionStore", "WriterProgressStore", "config_state_exists",
    "is_postgres_url", "open_config_state", "open_configured", "open_configured_async", "open_state",
    "open_state_async", "open_state_url", "parse_ts", "ts",
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


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and str(url).split(":", 1)[0] in ("postgresql", "postgres")


def open_state_url(url: str, *, components: Iterable[str] = COMPONENTS, pool_size: int = 16) -> State:
    """Open the PostgreSQL database at ``url`` (``postgresql://user@host:port/db``), applying missing
    migrations. Blocking. psycopg is imported only here: a SQLite install never loads it."""
    if not is_postgres_url(url):
        raise ValueError(f"not a PostgreSQL URL: {url!r} (state.url takes postgresql://...)")
    from gateway.state.postgres import open_postgres

    return open_postgres(url, components, pool_size=pool_size)


def open_configured(data_dir: Path, url: str | None = None, *, pool_size: int = 16) -> State:
    """The state a config names: PostgreSQL at ``url`` (``state.url``), else ``<data_dir>/state.sqlite``.
    Callers holding a ``Config`` pass ``config.state.url`` (a secret: ``get_secret_value()``) and
    ``config.state.pool_size``."""
    if url:
        return open_state_url(url, pool_size=pool_size)
    return open_state(Path(data_dir) / "state.sqlite")


async def open_configured_async(data_dir: Path, url: str | None = None, *, pool_size: int = 16) -> State:
    """``open_configured`` in a worker thread."""
    return await asyncio.to_thread(lambda: open_configured(data_dir, url, pool_size=pool_size))


def _config_url(config: Any) -> str | None:
    url = getattr(getattr(config, "state", None), "url", None)
    if url is None:
        return None
    return str(url.get_secret_value() if hasattr(url, "get_secret_value") else url) or None


def open_config_state(config: Any) -> State:
    """The state of a kith ``Config`` (its ``data_dir`` and ``state`` section; read by attribute, as
    this package imports nothing else of kith): what every command with a config opens."""
    pool_size = int(getattr(getattr(config, "state", None), "pool_size", 16))
    return open_configured(Path(config.data_dir), _config_url(config), pool_size=pool_size)


def config_state_exists(config: Any) -> bool:
    """False only for a SQLite install whose file is not there yet (kith never ran with this config)."""
    return _config_url(config) is not None or (Path(config.data_dir) / "state.sqlite").exists()
