"""The one place a due item leaves kith: the delivery outbox (``gateway.delivery.outbox.deliver``).

Durable and routed (origin -> the person's notification conversation -> preferred channel -> any
linked channel), idempotent by ``delivery_id``: the schedule names each occurrence
(``reminder:<user>:<id>:<instant>``), so a retried job never delivers one occurrence twice.
``direct_send`` is the pre-outbox path (origin conversation through ``gateway.send``), kept for a
gateway built without the delivery plugin.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gateway.delivery.outbox import deliver as outbox_deliver
from gateway.types import ConversationAddress, ConversationKind, Reply
from gateway.util.text import split_text

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.schedule")


async def deliver(gateway: Services, *, user_id: str, text: str, kind: str, origin: ConversationAddress | None,
                  delivery_id: str, notice: bool = False) -> None:
    await outbox_deliver(gateway, user_id=user_id, text=text, kind=kind, origin=origin, delivery_id=delivery_id,
                         notice=notice)


async def direct_send(gateway: Services, *, user_id: str, text: str, kind: str, origin: ConversationAddress | None,
                      delivery_id: str, notice: bool = False) -> None:
    address = origin or _last_direct(gateway, user_id)
    if address is None:
        raise LookupError(f"no conversation of {user_id} to deliver {kind} {delivery_id} to")
    chunks = tuple(split_text(text, gateway.message_limit(address.channel)))
    await gateway.send(address, Reply(text=text, chunks=chunks, notice=notice))


def _last_direct(gateway: Services, user_id: str) -> ConversationAddress | None:
    for channel, account in gateway.identities.accounts(user_id):
        if channel in gateway.adapters:
            return ConversationAddress(channel=channel, conversation_id=account, kind=ConversationKind.DM,
                                       user_id=user_id, persona=gateway.config.personas.default)
    return None
