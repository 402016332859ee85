"""The daemon's outbox sweep: every few seconds, due rows are attempted (and, every hour, old sent
and failed rows deleted: ``gateway.delivery.prune``).

Due rows are the ones held through quiet hours whose window ended, the ones waiting to be retried,
and the ones left ``sending`` by a crashed process once their lease ran out. The sweep is one indexed
query per tick (``outbox(status, due_at)``), so its cost follows what is due, not what is stored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.delivery.outbox import attempt
from gateway.delivery.prune import prune_once

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.delivery")

SWEEP_INTERVAL_S = 1.0
BATCH = 200


async def sweep_once(gateway: Services, now: datetime | None = None) -> int:
    """Attempt every due row once; the number attempted."""
    now = now or datetime.now(UTC)
    done = 0
    while True:
        batch = gateway.state.outbox.due(now, limit=BATCH)
        if not batch:
            return done
        for entry in batch:
            try:
                await attempt(gateway, entry.delivery_id, now=now)
            except Exception:
                log.exception("delivery %s: attempt failed", entry.delivery_id)
            done += 1
        if len(batch) < BATCH:
            return done
        await asyncio.sleep(0)  # a big backlog never holds the loop for long


async def run_sweeper(gateway: Services, stop: asyncio.Event, interval: float = SWEEP_INTERVAL_S) -> None:
    """Sweep every ``interval`` seconds; delete old sent and failed rows every
    ``delivery.prune_interval_s`` (the first time right away)."""
    next_prune = 0.0
    while not stop.is_set():
        try:
            await sweep_once(gateway)
        except Exception:
            log.exception("outbox sweep failed")
        if time.monotonic() >= next_prune:
            next_prune = time.monotonic() + gateway.config.delivery.prune_interval_s
            try:
                await prune_once(gateway)
            except Exception:
                log.exception("outbox pruning failed")
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            pass
