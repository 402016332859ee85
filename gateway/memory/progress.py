"""Progress of the background memory jobs, in the gateway's state database (tables ``bg_*``).

What must survive a crash or a retry lives here, next to the transcript it points into:

* ``bg_writer``: per session, the last transcript row (``turns.seq``) the memory writer summarised;
* ``bg_sleep``: per scope (``user:<id>`` / ``channel:<key>``), the last row the sleep cycle processed;
* ``bg_sleep_runs``: one row per (scope, night): the batch boundary, the raw model output until the
  night is applied (so a retry after a crash re-applies the same answer instead of asking again), and
  the stage reached;
* ``bg_distill``: the last run of each distillation tier per user (``GET /distill/status``);
* ``bg_retention``: per scope, the last cutoff applied (so old days are visited once).

Everything takes a ``sqlite3.Connection`` in autocommit mode (``gateway.state.State.db``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.state import ts

SCHEMA = """
CREATE TABLE IF NOT EXISTS bg_writer (
    session_id TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bg_sleep (
    scope TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL DEFAULT 0,
    last_slot TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bg_sleep_runs (
    scope TEXT NOT NULL,
    slot TEXT NOT NULL,
    day TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    upto_seq INTEGER NOT NULL,
    turns INTEGER NOT NULL,
    output TEXT NOT NULL DEFAULT '',
    stage TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, slot)
);
CREATE TABLE IF NOT EXISTS bg_distill (
    user_id TEXT NOT NULL,
    tier TEXT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    chars INTEGER NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (user_id, tier)
);
CREATE TABLE IF NOT EXISTS bg_retention (
    scope TEXT PRIMARY KEY,
    last_cutoff TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
"""

# Connections whose tables exist. Held strongly: an id() alone could be reused by a later connection
# once this one is gone (connections cannot be weakly referenced); one entry per opened state database.
_READY: dict[int, sqlite3.Connection] = {}


def ensure(db: sqlite3.Connection) -> sqlite3.Connection:
    """Create the tables once per connection (cheap to call from every job)."""
    if _READY.get(id(db)) is not db:
        db.executescript(SCHEMA)
        _READY[id(db)] = db
    return db


@contextmanager
def tx(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:  # cancellation included: never leave the shared connection mid-transaction
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


# ------------------------------------------------------------------------------------------ writer


def writer_watermark(db: sqlite3.Connection, session_id: str) -> int:
    row = ensure(db).execute("SELECT last_seq FROM bg_writer WHERE session_id=?", (session_id,)).fetchone()
    return int(row[0]) if row else 0


def advance_writer(db: sqlite3.Connection, session_id: str, seq: int) -> None:
    """Move the watermark forward only (a late retry of an older batch never moves it back)."""
    ensure(db).execute(
        "INSERT INTO bg_writer(session_id, last_seq, updated_at) VALUES (?,?,?) ON CONFLICT(session_id) DO "
        "UPDATE SET last_seq=max(last_seq, excluded.last_seq), updated_at=excluded.updated_at",
        (session_id, seq, ts()),
    )


# ------------------------------------------------------------------------------------------- sleep


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


def sleep_last_seq(db: sqlite3.Connection, scope: str) -> int:
    row = ensure(db).execute("SELECT last_seq FROM bg_sleep WHERE scope=?", (scope,)).fetchone()
    return int(row[0]) if row else 0


def sleep_run(db: sqlite3.Connection, scope: str, slot: str) -> SleepRun | None:
    row = ensure(db).execute(
        "SELECT scope, slot, day, first_seq, upto_seq, turns, output, stage, detail FROM bg_sleep_runs "
        "WHERE scope=? AND slot=?",
        (scope, slot),
    ).fetchone()
    names = ("scope", "slot", "day", "first_seq", "upto_seq", "turns", "output", "stage", "detail")
    return SleepRun(**dict(zip(names, tuple(row), strict=True))) if row else None


def save_extraction(db: sqlite3.Connection, run: SleepRun) -> None:
    now = ts()
    ensure(db).execute(
        "INSERT INTO bg_sleep_runs(scope, slot, day, first_seq, upto_seq, turns, output, stage, detail, "
        "created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (run.scope, run.slot, run.day, run.first_seq, run.upto_seq, run.turns, run.output, run.stage, run.detail,
         now, now),
    )  # fmt: skip


def set_stage(db: sqlite3.Connection, scope: str, slot: str, stage: str, detail: str = "") -> None:
    ensure(db).execute(
        "UPDATE bg_sleep_runs SET stage=?, detail=?, updated_at=? WHERE scope=? AND slot=?",
        (stage, detail, ts(), scope, slot),
    )


def finish_night(db: sqlite3.Connection, scope: str, slot: str, upto_seq: int, detail: str = "") -> None:
    """Advance the scope past the night's turns and drop the stored model output, in one transaction."""
    now = ts()
    with tx(ensure(db)):
        db.execute(
            "INSERT INTO bg_sleep(scope, last_seq, last_slot, updated_at) VALUES (?,?,?,?) ON CONFLICT(scope) DO "
            "UPDATE SET last_seq=max(last_seq, excluded.last_seq), last_slot=excluded.last_slot, "
            "updated_at=excluded.updated_at",
            (scope, upto_seq, slot, now),
        )
        db.execute(
            "UPDATE bg_sleep_runs SET stage='done', output='', detail=?, updated_at=? WHERE scope=? AND slot=?",
            (detail, now, scope, slot),
        )


def mark_empty_night(db: sqlite3.Connection, scope: str, slot: str) -> None:
    ensure(db).execute(
        "INSERT INTO bg_sleep(scope, last_seq, last_slot, updated_at) VALUES (?,0,?,?) ON CONFLICT(scope) DO "
        "UPDATE SET last_slot=excluded.last_slot, updated_at=excluded.updated_at",
        (scope, slot, ts()),
    )


# ----------------------------------------------------------------------------------------- distill


def distill_started(db: sqlite3.Connection, user_id: str, tier: str) -> None:
    ensure(db).execute(
        "INSERT INTO bg_distill(user_id, tier, status, detail, chars, started_at, finished_at) "
        "VALUES (?,?,'running','',0,?,NULL) ON CONFLICT(user_id, tier) DO UPDATE SET status='running', "
        "started_at=excluded.started_at",
        (user_id, tier, ts()),
    )


def distill_finished(db: sqlite3.Connection, user_id: str, tier: str, status: str, detail: str, chars: int) -> None:
    ensure(db).execute(
        "UPDATE bg_distill SET status=?, detail=?, chars=?, finished_at=? WHERE user_id=? AND tier=?",
        (status, detail[:500], chars, ts(), user_id, tier),
    )


def distill_status(db: sqlite3.Connection, user_id: str | None = None) -> list[dict[str, Any]]:
    sql = "SELECT user_id, tier, status, detail, chars, started_at, finished_at FROM bg_distill"
    rows = ensure(db).execute(
        sql + (" WHERE user_id=? ORDER BY tier" if user_id else " ORDER BY user_id, tier"),
        (user_id,) if user_id else (),
    ).fetchall()
    return [dict(zip(("user_id", "tier", "status", "detail", "chars", "started_at", "finished_at"), r,
                     strict=True)) for r in rows]  # fmt: skip


# --------------------------------------------------------------------------------------- retention


def retention_cutoff(db: sqlite3.Connection, scope: str) -> str | None:
    row = ensure(db).execute("SELECT last_cutoff FROM bg_retention WHERE scope=?", (scope,)).fetchone()
    return str(row[0]) if row else None


def set_retention_cutoff(db: sqlite3.Connection, scope: str, cutoff: datetime) -> None:
    ensure(db).execute(
        "INSERT INTO bg_retention(scope, last_cutoff, updated_at) VALUES (?,?,?) ON CONFLICT(scope) DO UPDATE "
        "SET last_cutoff=excluded.last_cutoff, updated_at=excluded.updated_at",
        (scope, ts(cutoff), ts()),
    )
