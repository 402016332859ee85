"""The durable outbox: every proactive message is recorded before it is sent, then routed.

``deliver`` records the row (its ``delivery_id`` makes a retried caller idempotent), holds it through
the person's quiet hours, and tries the routes in order: the conversation it belongs to, the person's
notification conversation (notices without one), their preferred channel, then any linked channel
that takes it. When none does and the person has a web or WebSocket client, the message waits as
``missed`` for that client's next connection; otherwise it is tried again later with backoff.

Guarantee (docs/proactive.md, "Delivery guarantees"): a recorded delivery is never lost; the attempt is
counted and leased before the send, and marked sent after it (a WebSocket frame to a client that
acknowledges: on its ack, gateway/delivery/acks.py). A crash between the send and the mark leaves the
row ``sending``; once the lease runs out the sweep (gateway/delivery/sweep.py) sends it again: at most
one duplicate per crash between send and record, on platforms that cannot deduplicate.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gateway.delivery.acks import MAX_UNACKED, awaiting
from gateway.delivery.quiet import quiet_until
from gateway.delivery.routing import WEB_CHANNEL, routes, web_reachable
from gateway.state.delivery import OutboxEntry
from gateway.types import ConversationAddress, Reply
from gateway.util.text import split_text

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.delivery")

#: How long one attempt owns its row: a row still ``sending`` after this was cut off by a crash and is
#: sent again. Longer than any adapter's send takes (their HTTP timeouts are shorter).
LEASE_S = 30.0
#: Retry delays when no channel could take the message (and no web client will pick it up).
RETRY_BASE_S = 30.0
RETRY_MAX_S = 3600.0
MAX_ATTEMPTS = 30
#: A turn's reply its adapter could not deliver (gateway/delivery/handover.py): quiet hours never hold
#: it, the person has just written.
REPLY_KIND = "reply"


def encode_origin(origin: ConversationAddress | None) -> str:
    if origin is None:
        return ""
    return json.dumps({"channel": origin.channel, "conversation_id": origin.conversation_id,
                       "kind": origin.kind.value, "persona": origin.persona})  # fmt: skip


async def deliver(gateway: Services, *, user_id: str, text: str, kind: str, origin: ConversationAddress | None,
                  delivery_id: str, notice: bool = False) -> None:  # fmt: skip
    """Record one proactive message and deliver it (now, or when the person's quiet hours end).

    Idempotent by ``delivery_id``: calling again after a crash or a retried job sends nothing twice
    that was marked sent. Raises only when the outbox itself cannot record (the caller's job retries)."""
    now = datetime.now(UTC)
    entry = gateway.state.outbox.record(OutboxEntry(
        delivery_id=delivery_id, user_id=user_id, kind=kind, text=text, notice=notice,
        origin=encode_origin(origin), status="pending", due_at=now, attempts=0, created_at=now, sent_at=None,
        channel="", detail="",
    ))
    if entry.status != "pending" or entry.due_at > now:
        return  # already sent, waiting for a client, held, or being sent by another attempt
    await attempt(gateway, delivery_id, now=now)


async def attempt(gateway: Services, delivery_id: str, *, now: datetime | None = None) -> str:
    """One attempt at a due row: the status it is left in ("" when another attempt owns it)."""
    now = now or datetime.now(UTC)
    outbox = gateway.state.outbox
    current = outbox.get(delivery_id)
    if current is None:
        return ""
    held = None if current.kind == REPLY_KIND else quiet_until(gateway, current.user_id, now)
    if held is not None:
        outbox.reschedule(delivery_id, due_at=held, detail=f"quiet hours until {held.isoformat()}")
        return "pending"
    entry = outbox.claim(delivery_id, now=now, lease_until=now + timedelta(seconds=LEASE_S))
    if entry is None:
        return ""
    failures: list[str] = []
    web_origin = entry.origin and json.loads(entry.origin).get("channel") == WEB_CHANNEL
    for stage, address in routes(gateway, entry):
        if stage == "linked" and web_origin:
            break  # set in the web chat, no channel preferred: it waits for the tab (docs/proactive.md)
        chunks = tuple(split_text(entry.text, gateway.message_limit(address.channel)))
        try:
            await gateway.send(address, Reply(text=entry.text, chunks=chunks, notice=entry.notice,
                                              delivery_id=delivery_id))  # fmt: skip
        except Exception as exc:  # one channel down: the next route may reach the person
            failures.append(f"{address.channel}: {exc}")
            continue
        if awaiting(gateway, delivery_id) and entry.attempts < MAX_UNACKED:
            return "sending"  # written to clients that acknowledge: sent on their ack (gateway/delivery/acks.py)
        outbox.mark_sent(delivery_id, channel=address.channel, at=datetime.now(UTC))
        return "sent"
    detail = "; ".join(failures)[:500] or "no channel can reach this person"
    if web_reachable(gateway, entry.user_id):
        outbox.mark_missed(delivery_id, detail=detail)
        return "missed"
    if entry.attempts >= MAX_ATTEMPTS:
        outbox.mark_failed(delivery_id, detail=detail)
        log.warning("delivery %s to %s failed for good after %d attempts: %s", delivery_id, entry.user_id,
                    entry.attempts, detail)  # fmt: skip
        return "failed"
    delay = min(RETRY_MAX_S, RETRY_BASE_S * 2 ** (entry.attempts - 1))
    outbox.reschedule(delivery_id, due_at=now + timedelta(seconds=delay), detail=detail)
    log.info("delivery %s to %s: no route took it (%s); again in %.0f s", delivery_id, entry.user_id, detail, delay)
    return "pending"
