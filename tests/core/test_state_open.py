"""Opening the state never blocks the event loop (issue 13: ``enable_wal`` slept in ``Gateway.start``).

A fresh database is switched to WAL when opened; when another process holds a lock on it (a kith
worker doing the same, a backup), the switch waits. Before, that wait (SQLite's busy handler, then
``time.sleep`` between retries) ran on the event loop: nothing else was served until the lock went.
Now the database is opened in a worker thread, and the loop keeps running meanwhile.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from gateway.app import Gateway
from tests.conftest import make_config

HOLD_S = 1.5


async def test_a_locked_fresh_database_does_not_stall_the_loop_while_the_gateway_starts(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    path = Path(cfg.data_dir) / "state.sqlite"
    path.parent.mkdir(parents=True)
    # Another process reads the new database (rollback journal, a shared lock): no WAL switch until it ends.
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE held (x INTEGER)")
    holder.execute("BEGIN")
    holder.execute("SELECT * FROM held").fetchall()

    gw = Gateway(cfg, entry_points=False, serve_http=False, supervise=False)
    loop = asyncio.get_running_loop()
    start = loop.create_task(gw.start())
    gaps: list[float] = []
    try:
        last = loop.time()
        deadline = last + HOLD_S
        while loop.time() < deadline:
            await asyncio.sleep(0.01)
            now = loop.time()
            gaps.append(now - last)
            last = now
        assert not start.done(), "the gateway cannot have opened its state while the lock is held"
        holder.execute("COMMIT")  # the other process lets go
        await asyncio.wait_for(start, 30)
        assert max(gaps) < HOLD_S / 2, f"the event loop stalled for {max(gaps):.2f}s"
        assert gw.state.users.get("nobody") is None
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        holder.close()
        if not start.done():
            start.cancel()
        await asyncio.gather(start, return_exceptions=True)
        await gw.close()
