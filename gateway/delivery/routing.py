"""Where a proactive message goes: the routes of one outbox row, in the order they are tried.

1. the conversation it belongs to (where the reminder was set);
2. for a message that belongs to no conversation: the person's notification conversation;
3. the person's preferred channel (their most recent one-to-one conversation there);
4. every other one-to-one conversation of theirs on a running channel, most recently seen first.

A channel whose adapter is not running is skipped. The web chat and WebSocket clients are routes
like any other: they take the message only while a client of the person is connected. A message that
belongs to a web chat conversation whose tab is closed stops before step 4: it waits for the tab
(``missed``) unless the person prefers another channel; choosing one is how a person says "reach
me there when I am away".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gateway.state.delivery import OutboxEntry
from gateway.types import ConversationAddress, ConversationKind

if TYPE_CHECKING:
    from gateway.services import Services

WEB_CHANNEL = "websocket"


def decode_origin(origin: str, user_id: str) -> ConversationAddress | None:
    if not origin:
        return None
    try:
        data = json.loads(origin)
        return ConversationAddress(channel=str(data["channel"]), conversation_id=str(data["conversation_id"]),
                                   kind=ConversationKind(data.get("kind", "dm")), user_id=user_id,
                                   persona=str(data.get("persona") or "default"))  # fmt: skip
    except (ValueError, KeyError, TypeError):
        return None


def routes(gateway: Services, entry: OutboxEntry) -> Iterator[tuple[str, ConversationAddress]]:
    """(stage, address) in the order they are tried; stage is origin, notify, preferred or linked."""
    seen: set[tuple[str, str]] = set()
    default_persona = gateway.config.personas.default

    def fresh(address: ConversationAddress | None) -> bool:
        if address is None or address.channel not in gateway.adapters:
            return False
        key = (address.channel, address.conversation_id)
        if key in seen:
            return False
        seen.add(key)
        return True

    outbox = gateway.state.outbox
    origin = decode_origin(entry.origin, entry.user_id)
    if fresh(origin):
        assert origin is not None
        yield "origin", origin
    prefs = outbox.prefs(entry.user_id)
    if origin is None and prefs.notify_conversation:
        conv = gateway.state.conversations.get(prefs.notify_conversation)
        if conv is not None:
            address = ConversationAddress(channel=conv.channel, conversation_id=conv.conversation_id,
                                          kind=ConversationKind(conv.kind), user_id=entry.user_id,
                                          persona=conv.persona or default_persona)  # fmt: skip
            if fresh(address):
                yield "notify", address
    direct = outbox.direct_conversations(entry.user_id)
    preferred = [c for c in direct if c.channel == prefs.preferred_channel]
    others = [c for c in direct if c.channel != prefs.preferred_channel]
    for conv in preferred + others:
        address = ConversationAddress(channel=conv.channel, conversation_id=conv.conversation_id,
                                      kind=ConversationKind.DM, user_id=entry.user_id,
                                      persona=conv.persona or default_persona)  # fmt: skip
        if fresh(address):
            yield ("preferred" if conv.channel == prefs.preferred_channel else "linked"), address
    # Linked accounts never seen in a conversation yet (linked from the console): their DM is the account.
    accounts = gateway.state.identities.accounts(entry.user_id)
    for channel, account_id in sorted(accounts, key=lambda a: a[0] != prefs.preferred_channel):
        address = ConversationAddress(channel=channel, conversation_id=account_id, user_id=entry.user_id,
                                      persona=default_persona)  # fmt: skip
        if fresh(address):
            yield ("preferred" if channel == prefs.preferred_channel else "linked"), address


def web_reachable(gateway: Services, user_id: str) -> bool:
    """Whether the person has a web or WebSocket client that will collect missed messages."""
    return WEB_CHANNEL in gateway.adapters and any(
        channel == WEB_CHANNEL for channel, _ in gateway.state.identities.accounts(user_id))
