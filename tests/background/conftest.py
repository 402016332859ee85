"""Fixtures for the background-memory tests: a real gateway (bus, memory service, state) whose model is
the fake Anthropic server, and helpers to talk to it and to script the model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.types import ConversationKind, InboundMessage

# Retries without waiting, so a failing job reaches its dead letter in the test's lifetime.
FAST_BUS = {"retry_backoff_s": 0, "retry_backoff_max_s": 0, "claim_idle_ms": 2000}


def msg(text: str, account: str = "alice", *, group: str = "", channel: str = "websocket",
        at: datetime | None = None) -> InboundMessage:  # fmt: skip
    extra: dict[str, Any] = {}
    if group:
        extra = {"conversation_id": group, "kind": ConversationKind.GROUP, "mentioned": True}
    return InboundMessage(channel=channel, account_id=account, text=text, display_name=account.title(),
                          timestamp=at or datetime.now(UTC), trusted=True, **extra)  # fmt: skip


async def say(gw: Gateway, *texts: str, account: str = "alice", group: str = "") -> str:
    """``account`` says each of ``texts``, one turn each; returns its user id (it exists once it spoke)."""
    for text in texts:
        await gw.handle_inbound(msg(text, account, group=group))
    return user_id(gw, account)


def user_id(gw: Gateway, account: str = "alice") -> str:
    uid = gw.identities.lookup("websocket", account)
    assert uid is not None
    return uid


BgFactory = Callable[..., Awaitable[Gateway]]


@pytest.fixture
def bg_gateway(make_gateway: Any, anthropic_llm: dict[str, Any]) -> BgFactory:
    """A gateway on the fake model; ``background=`` and ``bus=`` overrides merge into the defaults."""

    async def factory(*, background: dict[str, Any] | None = None, bus: dict[str, Any] | None = None,
                      **overrides: Any) -> Gateway:  # fmt: skip
        bg: dict[str, Any] = {"writer": {"turn_threshold": 1000, "idle_seconds": 3600}}
        for key, value in (background or {}).items():
            bg[key] = {**bg.get(key, {}), **value} if isinstance(value, dict) else value
        return await make_gateway(llm=anthropic_llm, background=bg, bus={**FAST_BUS, **(bus or {})}, **overrides)

    return factory
