"""Helpers for the memory-editing tests: a real gateway (echo model, real index), a person, recall."""

from __future__ import annotations

from typing import Any

from gateway.app import Gateway
from gateway.memory.files.scopes import user_scope
from gateway.memory.files.store import MemoryStore
from gateway.testing import message
from gateway.types import Reply


async def say(gw: Gateway, text: str, **kw: Any) -> str:
    reply = await gw.handle_inbound(message(text, **kw))
    assert isinstance(reply, Reply), text
    return reply.text


def uid(gw: Gateway, account: str = "alice", channel: str = "websocket") -> str:
    user_id = gw.identities.lookup(channel, account)
    assert user_id is not None
    return user_id


def store(gw: Gateway, account: str = "alice") -> MemoryStore:
    return gw.memory_store(uid(gw, account))


async def recall_texts(gw: Gateway, user_id: str, query: str, k: int = 20) -> list[str]:
    assert gw.memory is not None
    hits = await gw.memory.recall(scope=user_scope(user_id), query=query, k=k)
    return [h.text for h in hits]
