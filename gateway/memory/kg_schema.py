"""Table layout of the knowledge graph and the row <-> ``Fact`` mapping.

Table names carry a ``kg_`` prefix so the graph can live in ``state.sqlite`` next to other tables.
``*_key`` columns hold the normalised match form; the display text is kept as written.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from datetime import datetime

from gateway.memory.kg_time import from_db
from gateway.state import enable_wal

SCHEMA_VERSION = 1

SCHEMA = """
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
"""

COLUMNS = (
    "id, user_id, subject, predicate, object, valid_from, valid_until, confidence, source_type, source_ref, created_at"
)


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

    def is_current(self, at: datetime) -> bool:
        return self.valid_from <= at and (self.valid_until is None or self.valid_until > at)

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


def row_to_fact(row: sqlite3.Row | tuple[object, ...]) -> Fact:
    (fid, user_id, subject, predicate, obj, vf, vu, conf, stype, sref, created) = tuple(row)
    return Fact(
        id=int(fid),  # type: ignore[call-overload]
        user_id=str(user_id),
        subject=str(subject),
        predicate=str(predicate),
        object=str(obj),
        valid_from=from_db(str(vf)),
        valid_until=from_db(str(vu)) if vu is not None else None,
        confidence=float(conf),  # type: ignore[arg-type]
        source_type=str(stype),
        source_ref=str(sref),
        created_at=from_db(str(created)),
    )


def replay_key(
    user_id: str, subject_key: str, predicate: str, object_key: str, source_type: str, source_ref: str
) -> str | None:
    """Idempotency key: the same claim from the same source is one row, however often it is replayed.

    Without a ``source_ref`` there is no way to tell a replay from a genuine repeat, so no key is set
    and only the current-duplicate check in ``add`` applies.
    """
    if not source_ref:
        return None
    raw = "\x00".join((user_id, subject_key, predicate, object_key, source_type, source_ref))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def connect(path: str) -> sqlite3.Connection:
    # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE) so a write never upgrades a read
    # lock mid-transaction and hits SQLITE_BUSY when another connection shares the file.
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=30000")
    enable_wal(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("BEGIN IMMEDIATE")
    for stmt in SCHEMA.split(";"):
        if stmt.strip():
            conn.execute(stmt)
    conn.execute("INSERT OR IGNORE INTO kg_meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    conn.execute("COMMIT")
    return conn
