"""Progress of background work, one store per job: the ``bg_*`` tables and named transcript watermarks.

What must survive a crash or a retry lives here, next to the transcript it points into:

* ``bg_writer``: per session, the last transcript row (``turns.seq``) the memory writer summarised;
* ``bg_sleep``: per scope (``user:<id>`` / ``channel:<key>``), the last row the sleep cycle processed;
* ``bg_sleep_runs``: one row per (scope, night): the batch boundary, the raw model output until the
  night is applied (so a retry after a crash re-applies the same answer instead of asking again), and
  the stage reached;
* ``bg_distill``: the last run of each distillation tier per user (``GET /api/distill``);
* ``bg_retention``: per scope, the last cutoff applied (so old days are visited once);
* ``watermarks``: the transcript row a named consumer (the session log) has dealt with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.state.database import Database, greater
from gateway.state.records import SleepRun
from gateway.state.timestamps import parse_ts, ts

_DISTILL = ("user_id", "tier", "status", "detail", "chars", "started_at", "finished_at")


class Watermarks:
    """``watermarks``: the transcript row (``turns.seq``) a named consumer (the session log) has dealt with."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, name: str) -> int:
        """The transcript row a consumer named ``name`` has dealt with, 0 if none."""
        row = self._db.one("SELECT seq FROM watermarks WHERE name=?", (name,))
        return int(row[0]) if row else 0

    def set(self, name: str, seq: int) -> None:
        self._db.run(
            "INSERT INTO watermarks(name, seq, updated_at) VALUES (?,?,?)"
            " ON CONFLICT(name) DO UPDATE SET seq=excluded.seq, updated_at=excluded.updated_at",
            (name, seq, ts()),
        )


class WriterProgress:
    """``bg_writer``: per session, the last transcript row the memory writer summarised."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, session_id: str) -> int:
        row = self._db.one("SELECT last_seq FROM bg_writer WHERE session_id=?", (session_id,))
        return int(row[0]) if row else 0

    def advance(self, session_id: str, seq: int) -> None:
        """Move the watermark forward only (a late retry of an older batch never moves it back)."""
        self._db.run(
            "INSERT INTO bg_writer(session_id, last_seq, updated_at) VALUES (?,?,?) ON CONFLICT(session_id) DO "
            f"UPDATE SET last_seq={greater('bg_writer.last_seq', 'excluded.last_seq')}, updated_at=excluded.updated_at",
            (session_id, seq, ts()),
        )


class SleepRuns:
    """``bg_sleep`` and ``bg_sleep_runs``: how far the sleep cycle got per scope, and each night's run."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def last_seq(self, scope: str) -> int:
        row = self._db.one("SELECT last_seq FROM bg_sleep WHERE scope=?", (scope,))
        return int(row[0]) if row else 0

    def get(self, scope: str, slot: str) -> SleepRun | None:
        row = self._db.one(
            "SELECT scope, slot, day, first_seq, upto_seq, turns, output, stage, detail FROM bg_sleep_runs "
            "WHERE scope=? AND slot=?",
            (scope, slot),
        )
        if row is None:
            return None
        return SleepRun(scope=row[0], slot=row[1], day=row[2], first_seq=row[3], upto_seq=row[4], turns=row[5],
                        output=row[6], stage=row[7], detail=row[8])  # fmt: skip

    def save_extraction(self, run: SleepRun) -> None:
        now = ts()
        self._db.run(
            "INSERT INTO bg_sleep_runs(scope, slot, day, first_seq, upto_seq, turns, output, stage, detail, "
            "created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (run.scope, run.slot, run.day, run.first_seq, run.upto_seq, run.turns, run.output, run.stage,
             run.detail, now, now),
        )  # fmt: skip

    def set_stage(self, scope: str, slot: str, stage: str, detail: str = "") -> None:
        self._db.run("UPDATE bg_sleep_runs SET stage=?, detail=?, updated_at=? WHERE scope=? AND slot=?",
                     (stage, detail, ts(), scope, slot))  # fmt: skip

    def finish_night(self, scope: str, slot: str, upto_seq: int, detail: str = "") -> None:
        """Advance the scope past the night's turns and drop the stored model output, in one transaction."""
        now = ts()
        with self._db.tx():
            self._db.run(
                "INSERT INTO bg_sleep(scope, last_seq, last_slot, updated_at) VALUES (?,?,?,?) ON CONFLICT(scope) "
                f"DO UPDATE SET last_seq={greater('bg_sleep.last_seq', 'excluded.last_seq')},"
                " last_slot=excluded.last_slot, updated_at=excluded.updated_at",
                (scope, upto_seq, slot, now),
            )
            self._db.run(
                "UPDATE bg_sleep_runs SET stage='done', output='', detail=?, updated_at=? WHERE scope=? AND slot=?",
                (detail, now, scope, slot),
            )

    def mark_empty_night(self, scope: str, slot: str) -> None:
        self._db.run(
            "INSERT INTO bg_sleep(scope, last_seq, last_slot, updated_at) VALUES (?,0,?,?) ON CONFLICT(scope) DO "
            "UPDATE SET last_slot=excluded.last_slot, updated_at=excluded.updated_at",
            (scope, slot, ts()),
        )


class DistillRuns:
    """``bg_distill``: the last run of each distillation tier per user (``GET /api/distill``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def started(self, user_id: str, tier: str) -> None:
        self._db.run(
            "INSERT INTO bg_distill(user_id, tier, status, detail, chars, started_at, finished_at) "
            "VALUES (?,?,'running','',0,?,NULL) ON CONFLICT(user_id, tier) DO UPDATE SET status='running', "
            "started_at=excluded.started_at",
            (user_id, tier, ts()),
        )

    def finished(self, user_id: str, tier: str, status: str, detail: str, chars: int) -> None:
        self._db.run("UPDATE bg_distill SET status=?, detail=?, chars=?, finished_at=? WHERE user_id=? AND tier=?",
                     (status, detail[:500], chars, ts(), user_id, tier))  # fmt: skip

    def status(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """The last run of each tier (of one user, or everyone's), as JSON-ready dicts."""
        sql = "SELECT user_id, tier, status, detail, chars, started_at, finished_at FROM bg_distill"
        rows = self._db.all(sql + (" WHERE user_id=? ORDER BY tier" if user_id else " ORDER BY user_id, tier"),
                            (user_id,) if user_id else ())  # fmt: skip
        return [dict(zip(_DISTILL, r, strict=True)) for r in rows]


class RetentionCutoffs:
    """``bg_retention``: per scope, the last cutoff applied (so old days are visited once)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, scope: str) -> datetime | None:
        row = self._db.one("SELECT last_cutoff FROM bg_retention WHERE scope=?", (scope,))
        return parse_ts(str(row[0])) if row else None

    def set(self, scope: str, cutoff: datetime) -> None:
        self._db.run(
            "INSERT INTO bg_retention(scope, last_cutoff, updated_at) VALUES (?,?,?) ON CONFLICT(scope) DO UPDATE "
            "SET last_cutoff=excluded.last_cutoff, updated_at=excluded.updated_at",
            (scope, ts(cutoff), ts()),
        )

