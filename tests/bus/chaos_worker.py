"""A worker process for the chaos tests:
``python -m tests.bus.chaos_worker DATA_DIR EFFECTS_DB [CLAIM_IDLE_MS]``.

``effect`` writes an effect into SQLite idempotently (keyed by job id, in one IMMEDIATE
transaction), after a short random pause that widens the window for SIGKILL to land mid-job.
``poison_exit`` kills its own worker process on receipt. Every start is logged, so the tests can
count deliveries.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import sys
import time
from typing import Any

from gateway.bus import JobBus, JobContext, JobSpec
from gateway.configread import parse_config
from gateway.state.sqlite.database import enable_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (job_id TEXT NOT NULL, pid INTEGER, attempt INTEGER, t REAL);
CREATE TABLE IF NOT EXISTS executions (job_id TEXT NOT NULL, pid INTEGER, attempt INTEGER, t REAL);
"""


def open_db(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA busy_timeout=30000")
    # Switching to WAL while another worker does the same fails at once with "database is locked"
    # (no busy handler): that made a poison delivery fail before it could record its execution.
    enable_wal(db)
    return db


def make_effect(db_path: str) -> Any:
    def effect(ctx: JobContext, payload: dict[str, Any]) -> None:  # sync: runs in a worker thread
        db = open_db(db_path)
        try:
            db.execute(
                "INSERT INTO executions VALUES (?, ?, ?, ?)", (ctx.job_id, os.getpid(), ctx.attempt, time.time())
            )
            time.sleep(random.uniform(0.005, 0.04))
            db.execute("BEGIN IMMEDIATE")
            # No unique constraint on purpose: a duplicate effect would show up as a second row.
            if db.execute("SELECT 1 FROM effects WHERE job_id = ?", (ctx.job_id,)).fetchone() is None:
                db.execute(
                    "INSERT INTO effects VALUES (?, ?, ?, ?)", (ctx.job_id, os.getpid(), ctx.attempt, time.time())
                )
            db.execute("COMMIT")
        finally:
            db.close()

    return effect


def make_poison(db_path: str) -> Any:
    def poison_exit(ctx: JobContext, payload: dict[str, Any]) -> None:
        db = open_db(db_path)
        db.execute("INSERT INTO executions VALUES (?, ?, ?, ?)", (ctx.job_id, os.getpid(), ctx.attempt, time.time()))
        db.close()
        os._exit(1)  # the worker dies on receipt: no ack, no error recorded, no goodbye

    return poison_exit


async def main(data_dir: str, db_path: str, claim_idle_ms: int) -> None:
    config = parse_config(
        {
            "data_dir": data_dir,
            "bus": {"claim_idle_ms": claim_idle_ms, "max_tries": 10, "retry_backoff_s": 0.05, "shutdown_grace_s": 5},
        },
        env={},
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    specs = [
        JobSpec(name="effect", handler=make_effect(db_path)),
        JobSpec(name="poison_exit", handler=make_poison(db_path), max_tries=3),
    ]
    async with JobBus(config, specs, own_server=False) as bus:
        workers = asyncio.create_task(bus.run_workers(4, block_ms=200))
        for _ in range(1000):
            if bus.worker is not None:
                break
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await stop.wait()
        await bus.stop_workers()
        await workers


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1000))
