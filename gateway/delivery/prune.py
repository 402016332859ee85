"""Sent and failed outbox rows are deleted after ``delivery.retention_days`` (docs/proactive.md).

The outbox would otherwise grow by every reminder, briefing and notice ever sent. Pruning runs in the
outbox sweep (so on the one node that sweeps), every ``delivery.prune_interval_s``, a batch at a time
with the loop free between batches. Rows still to deliver (pending, sending, missed) are never
deleted, whatever their age.

Why a retention and not "delete when sent": a row's ``delivery_id`` names the occurrence it delivered,
and a fire that finds the row already sent sends nothing. The schedule records the occurrence in the
person's file seconds later (``gateway.schedule.record``); until then, and across a crash in between,
the row is what keeps the occurrence delivered once. Days of retention cover that many times over.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.delivery")
BATCH = 500


async def prune_once(gateway: Services, now: datetime | None = None) -> int:
    """Delete every sent or failed row older than the retention; how many (0 when kept forever)."""
    days = gateway.config.delivery.retention_days
    if days <= 0:
        return 0
    before = (now or datetime.now(UTC)) - timedelta(days=days)
    total = 0
    while True:
        n = gateway.state.outbox.prune(before=before, limit=BATCH)
        total += n
        if n < BATCH:
            break
        await asyncio.sleep(0)  # a large first prune never holds the loop for long
    if total:
        log.info("outbox: deleted %d sent or failed deliveries older than %g days", total, days)
    return total
