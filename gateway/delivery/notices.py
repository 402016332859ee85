"""Background notices for a person (a distillation finished ...): to their notification conversation.

A person who chose a notification conversation (settings ``notify_conversation``) gets each notice
there, through the outbox (recorded, retried, held through quiet hours); one who did not gets none,
so background work never starts talking to people who did not ask. The global
``background.distill.notify_conversation`` is the operator's copy, kept working and deprecated.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from gateway.delivery.outbox import deliver
from gateway.types import ConversationAddress, ConversationKind, Reply

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.delivery")


async def notify_person(gateway: Services, user_id: str, text: str, *, kind: str = "notice",
                        delivery_id: str = "") -> bool:  # fmt: skip
    """Queue a notice for the person when they chose a notification conversation; whether one was.
    Best effort: a failure is logged, the work that produced the notice stands."""
    if not gateway.state.outbox.prefs(user_id).notify_conversation:
        return False
    try:
        await deliver(gateway, user_id=user_id, text=text, kind=kind, origin=None,
                      delivery_id=delivery_id or f"{kind}:{user_id}:{uuid.uuid4().hex}", notice=True)  # fmt: skip
    except Exception as exc:
        log.warning("notice to %s could not be recorded: %s", user_id, exc)
    return True


async def notify_operator(gateway: Services, conversation_key: str, text: str, *, what: str) -> None:
    """Send ``text`` to an operator's conversation named in config (a distillation's or a night's
    log), as it is now: not through the outbox. Best effort: an unknown conversation or a failed send
    is logged under ``what``, and the work that produced the notice stands."""
    conversation = gateway.state.conversations.get(conversation_key)
    if conversation is None:
        log.warning("%s: conversation %s is unknown (no message seen from it)", what, conversation_key)
        return
    address = ConversationAddress(channel=conversation.channel, conversation_id=conversation.conversation_id,
                                  kind=ConversationKind(conversation.kind), user_id=conversation.user_id,
                                  persona=conversation.persona)  # fmt: skip
    try:
        await gateway.send(address, Reply(text=text, chunks=(text,), notice=True))
    except Exception as exc:
        log.warning("%s to %s failed: %s", what, conversation_key, exc)
