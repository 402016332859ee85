"""Old sent and failed outbox rows are deleted after ``delivery.retention_days``; rows still to deliver
never are; the daemon's sweep does it on its own."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

from gateway.delivery.prune import prune_once
from gateway.state.delivery import OutboxEntry
from gateway.testing import GatewayFactory


def _row(delivery_id: str, status: str, last_try: datetime) -> OutboxEntry:
    return OutboxEntry(delivery_id=delivery_id, user_id="u1", kind="reminder", text="x", notice=False, origin="",
                       status=status, due_at=last_try, attempts=1, created_at=last_try - timedelta(minutes=1),
                       sent_at=last_try if status == "sent" else None, channel="", detail="")  # fmt: skip


async def test_sent_and_failed_rows_older_than_the_retention_are_deleted(kith_gateway: GatewayFactory) -> None:
    gw = await kith_gateway(delivery={"retention_days": 30})
    now = datetime(2026, 6, 1, tzinfo=UTC)
    old, young = now - timedelta(days=31), now - timedelta(days=29)
    for status in ("sent", "failed", "pending", "sending", "missed"):
        gw.state.outbox.record(_row(f"old-{status}", status, old))
        gw.state.outbox.record(_row(f"young-{status}", status, young))
    assert await prune_once(gw, now) == 2
    left = {e.delivery_id for e in gw.state.outbox.list_for("u1", limit=100)}
    assert left == {"young-sent", "young-failed", "old-pending", "old-sending", "old-missed", "young-pending",
                    "young-sending", "young-missed"}
    assert await prune_once(gw, now) == 0

    # A large backlog goes in batches; retention 0 keeps everything.
    with gw.state.tx():
        for n in range(1203):
            gw.state.outbox.record(_row(f"d{n}", "sent", now - timedelta(days=400)))
    gw.config.delivery.retention_days = 0
    assert await prune_once(gw, now) == 0
    gw.config.delivery.retention_days = 1
    assert await prune_once(gw, now) == 1203 + 2  # and the young ones, now older than a day


async def test_the_daemons_sweep_prunes(kith_gateway: GatewayFactory) -> None:
    gw = await kith_gateway(delivery={"retention_days": 1, "prune_interval_s": 0.05})
    gw.state.outbox.record(_row("stale", "sent", datetime.now(UTC) - timedelta(days=2)))
    deadline = time.monotonic() + 10
    while gw.state.outbox.get("stale") is not None:
        assert time.monotonic() < deadline, "the sweep did not prune within 10 s"
        await asyncio.sleep(0.05)
