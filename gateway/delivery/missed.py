"""Missed messages: what the web chat and WebSocket clients are sent on their next connection.

A delivery no channel could take while the person had a web client is kept ``missed``; the next
``hello`` of any of their clients gets each as a ``reply`` frame marked ``"missed": true``
(docs/protocol.md), oldest first, and it is marked sent once the frame is written, or, for a client
that acknowledges, once it is acknowledged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from gateway.delivery.acks import MAX_UNACKED
from gateway.delivery.outbox import LEASE_S
from gateway.delivery.routing import WEB_CHANNEL

if TYPE_CHECKING:
    from gateway.services import Services


def missed_frame(entry: Any) -> dict[str, Any]:
    return {"type": "reply", "id": None, "text": entry.text, "notice": entry.notice, "otr": False,
            "proactive": True, "missed": True, "delivery_id": entry.delivery_id, "kind": entry.kind,
            "created_at": entry.created_at.isoformat()}  # fmt: skip


async def replay_missed(gateway: Services, user_id: str, send: Callable[[dict[str, Any]], Awaitable[bool]],
                        *, acks: bool = False) -> int:  # fmt: skip
    """Send the person's missed messages through ``send`` (a connection's); how many went out.
    ``acks``: the client acknowledges, so each row stays leased until its ack (gateway/delivery/acks.py)."""
    outbox = gateway.state.outbox
    sent = 0
    for entry in outbox.missed_for(user_id):
        if not outbox.take_missed(entry.delivery_id, lease_until=datetime.now(UTC) + timedelta(seconds=LEASE_S)):
            continue  # another tab of theirs is showing it
        if not await send(missed_frame(entry)):
            outbox.mark_missed(entry.delivery_id, detail="the client left during the replay")
            break  # the rest wait for the next connection
        if not acks or entry.attempts >= MAX_UNACKED:
            outbox.mark_sent(entry.delivery_id, channel=WEB_CHANNEL, at=datetime.now(UTC))
        sent += 1
    return sent
