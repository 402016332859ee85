"""Shared helpers: drive the real gateway with trusted messages and read what the model received."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.types import ConversationKind, InboundMessage
from tests.fakes.anthropic import FakeAnthropic

COMPACTION_MARK = "You keep the working memory of a personal assistant"


def msg(text: str, account: str = "ada", channel: str = "websocket", *, group: str = "", **kw: Any) -> InboundMessage:
    extra: dict[str, Any] = {}
    if group:
        extra = {"conversation_id": group, "kind": ConversationKind.GROUP, "mentioned": True}
    return InboundMessage(channel=channel, account_id=account, text=text, display_name=account.title(),
                          timestamp=datetime.now(UTC), trusted=True, **extra, **kw)


def turn_requests(fake: FakeAnthropic) -> list[dict[str, Any]]:
    """Requests of conversation turns, not of background jobs (compaction, memory writer...), which
    call the model at moments a test does not control: a turn's prompt carries the system block."""
    return fake.turn_requests()


def system_of(body: dict[str, Any]) -> str:
    system = body.get("system", [])
    return system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system)


def last_turn_system(fake: FakeAnthropic) -> str:
    return system_of(turn_requests(fake)[-1])
