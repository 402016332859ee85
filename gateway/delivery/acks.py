"""Acknowledged proactive frames: a WebSocket delivery counts once the client says it has it.

A frame written to a WebSocket is not yet with the client: a daemon SIGKILLed right after the write
takes the socket's unsent bytes with it, and a tab closing at that instant drops what it had not
read. The row was marked ``sent`` anyway, and the message was lost (1-2 of 1,000 in the delivery chaos
run, docs/proactive.md). So a client that says it acknowledges (``"acks": true`` in its ``hello``,
docs/protocol.md) answers every proactive frame with ``{"type": "ack", "delivery_id": ...}``, and the
row stays ``sending`` until that ack:

* the adapter writes the frame to acknowledging connections only and calls ``expect_ack``; the outbox
  attempt (``awaiting``) then leaves the row leased instead of marking it sent;
* the ack marks it sent (``acknowledge``; only the person's own client can, and only a row in flight);
* no ack before the lease ends (the daemon was killed, the client went away): the sweep sends the row
  again, live to a connected client or as missed at its next ``hello``. The client drops a frame whose
  ``delivery_id`` it has already shown, and acknowledges it again.

A client that does not acknowledge (an older or third-party one) keeps the old rule: delivered once
written. A row still unacknowledged after ``MAX_UNACKED`` sends is taken as delivered (a client that
says it acknowledges and never does must not be sent the same message forever).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.delivery.routing import WEB_CHANNEL
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services

MAX_UNACKED = 5
_EXPECTED: StashKey[set[str]] = StashKey()


def expect_ack(gateway: Services, delivery_id: str) -> None:
    """The frame of ``delivery_id`` went to clients that acknowledge: its row waits for their ack."""
    expected = gateway.stash.get(_EXPECTED)
    if expected is None:
        expected = gateway.stash[_EXPECTED] = set()
    expected.add(delivery_id)


def awaiting(gateway: Services, delivery_id: str) -> bool:
    """Whether the send that just returned left ``delivery_id`` to an ack (asked once per send)."""
    expected = gateway.stash.get(_EXPECTED)
    if expected is None or delivery_id not in expected:
        return False
    expected.discard(delivery_id)
    return True


def acknowledge(gateway: Services, delivery_id: str, user_id: str) -> bool:
    """A client of ``user_id`` has the frame: its row is sent. False for a row that is not theirs, not
    in flight (already sent, or never sent to them), or unknown: nothing changes then."""
    outbox = gateway.state.outbox
    entry = outbox.get(delivery_id)
    if entry is None or entry.user_id != user_id or entry.status != "sending":
        return False
    return outbox.mark_sent(delivery_id, channel=WEB_CHANNEL, at=datetime.now(UTC))
