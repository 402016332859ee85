"""The reply of a turn that outlived its adapter's restart, delivered by the gateway.

The supervisor restarts an adapter that stopped receiving (or whose run failed); the turns it had in
flight go on (gateway/turn/inflight.py), but the handler that started one may be gone, or hold the
old run's closed client. Its reply then goes through the outbox once the adapter is serving again:
recorded first (so a crash or a shutdown meanwhile leaves a row the sweep sends after the next
start), held back from the sweep while the adapter reconnects (a send to a channel still
reconnecting fails and waits for the outbox's first retry), then attempted the moment the new run
is connected. Quiet hours never hold it (``REPLY_KIND``): the person has just written.

Off-The-Record replies are never written to the outbox (nothing of an OTR session is stored): they are
sent straight through ``gateway.send`` once the adapter is back, best effort. So are the notices to a
sender with no identity (an access refusal), which have no person to record them for.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gateway.delivery.outbox import REPLY_KIND, attempt, encode_origin
from gateway.state.delivery import OutboxEntry
from gateway.types import ConversationAddress, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.delivery")


#: Set by the gateway for the handler of a turn that returned to it (gateway/turn/inflight.py): called
#: with a reply that handler could not deliver (and whether it was cancelled), it answers whether the
#: gateway delivers it instead.
RESCUE: ContextVar[Callable[[Reply, bool], bool] | None] = ContextVar("kith_reply_rescue", default=None)


def rescue(reply: Reply, *, cancelled: bool = False) -> bool:
    """The adapter's handler could not deliver ``reply``: a restart cancelled it while sending
    (``cancelled``), or its send failed. Whether the gateway delivers it after the restart instead:
    yes when cancelled outside shutdown, or when the adapter was restarted since the turn began; no
    otherwise (an ordinary platform failure stays the handler's, as it always was)."""
    take = RESCUE.get()
    return take is not None and take(reply, cancelled)


def reply_delivery_id(turn_id: str) -> str:
    return f"{REPLY_KIND}:{turn_id}"


def address_of(turn: Turn) -> ConversationAddress:
    msg, session = turn.message, turn.session
    return ConversationAddress(channel=msg.channel, conversation_id=msg.conversation_id or msg.account_id,
                               kind=msg.kind, user_id=turn.user.user_id if turn.user is not None else "",
                               persona=session.persona if session is not None else "default")  # fmt: skip


def record_reply(gateway: Services, turn: Turn, reply: Reply, *, hold_s: float) -> str:
    """Write the reply to the outbox, due in ``hold_s`` (the sweep leaves it to ``send_reply`` until
    then); its delivery id, or "" for a reply that is never stored (OTR, no identity)."""
    address = address_of(turn)
    if reply.otr or not address.user_id:
        return ""
    delivery_id = reply_delivery_id(turn.turn_id)
    now = datetime.now(UTC)
    gateway.state.outbox.record(OutboxEntry(
        delivery_id=delivery_id, user_id=address.user_id, kind=REPLY_KIND, text=reply.text, notice=reply.notice,
        origin=encode_origin(address), status="pending", due_at=now + timedelta(seconds=hold_s), attempts=0,
        created_at=now, sent_at=None, channel="", detail="",
    ))  # fmt: skip
    return delivery_id


async def send_reply(gateway: Services, turn: Turn, reply: Reply, delivery_id: str, *,
                     serving: Callable[[], Awaitable[bool]]) -> None:  # fmt: skip
    """Deliver a reply ``record_reply`` handled once ``serving()`` says its adapter is back (it waits,
    bounded, and answers whether the adapter came back)."""
    channel = turn.message.channel
    came_back = await serving()
    if delivery_id:
        status = await attempt(gateway, delivery_id)
        log.info("turn %s: its reply went through the outbox after %s restarted: %s%s", turn.turn_id, channel,
                 status or "taken by another attempt", "" if came_back else " (the channel had not come back)")
        return
    if not came_back:
        log.warning("turn %s: %s did not come back; its reply (never stored: %s) is not sent", turn.turn_id,
                    channel, "Off-The-Record" if reply.otr else "no identity")  # fmt: skip
        return
    try:
        await gateway.send(address_of(turn), reply)
    except Exception as exc:
        log.warning("turn %s: its reply could not be sent after %s restarted (%s: %s)", turn.turn_id, channel,
                    type(exc).__name__, exc)  # fmt: skip
