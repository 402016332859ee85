"""The one place a due item leaves kith: the delivery outbox when it exists, else the old direct send.

``gateway.delivery.outbox.deliver`` (durable, routed: origin -> preferred channel -> any linked
channel) is the contract; until it is present, the item goes to its origin conversation, or the
person's most recent direct conversation, through ``gateway.send``. Switching is this module only.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from gateway.text import split_text
from gateway.types import ConversationAddress, ConversationKind, Reply

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger("kith.schedule")


def _outbox() -> Any:
    try:
        return importlib.import_module("gateway.delivery.outbox").deliver
    except (ImportError, AttributeError):
        return None


async def deliver(gateway: Gateway, *, user_id: str, text: str, kind: str, origin: ConversationAddress | None,
                  delivery_id: str, notice: bool = False) -> None:
    outbox = _outbox()
    if outbox is not None:
        await outbox(gateway, user_id=user_id, text=text, kind=kind, origin=origin, delivery_id=delivery_id,
                     notice=notice)
        return
    address = origin or _last_direct(gateway, user_id)
    if address is None:
        raise LookupError(f"no conversation of {user_id} to deliver {kind} {delivery_id} to")
    chunks = tuple(split_text(text, gateway.message_limit(address.channel)))
    await gateway.send(address, Reply(text=text, chunks=chunks, notice=notice))


def _last_direct(gateway: Gateway, user_id: str) -> ConversationAddress | None:
    for channel, account in gateway.identities.accounts(user_id):
        if channel in gateway.adapters:
            return ConversationAddress(channel=channel, conversation_id=account, kind=ConversationKind.DM,
                                       user_id=user_id, persona=gateway.config.personas.default)
    return None
