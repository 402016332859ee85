"""Helpers of the /v1 tests: a gateway on a real port whose model is the fake Anthropic server, people
with API keys, and the official ``openai`` client pointed at the gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from openai import AsyncOpenAI

from gateway.app import Gateway
from gateway.http.api_keys import mint
from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic

Start = Callable[..., Awaitable[Gateway]]


@pytest.fixture
def start(kith_gateway: GatewayFactory, anthropic_llm: dict[str, Any]) -> Start:
    async def factory(**overrides: Any) -> Gateway:
        return await kith_gateway(llm=anthropic_llm, **overrides)

    return factory


def person(gw: Gateway, user_id: str, name: str) -> str:
    """A person (as the operator's ``identity_links`` would make them) and a new API key of theirs."""
    gw.state.users.ensure(user_id, display_name=name, timezone="UTC", at=datetime.now(UTC))
    return mint(gw.state, user_id, label="test").key


_OPENED: list[AsyncOpenAI] = []


def client(gw: Gateway, key: str) -> AsyncOpenAI:
    """The official client, closed when the test ends (``_close_clients``)."""
    opened = AsyncOpenAI(base_url=f"http://127.0.0.1:{gw.port}/v1", api_key=key, max_retries=0, timeout=20)
    _OPENED.append(opened)
    return opened


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """A client left open is closed by its ``__del__`` whenever the garbage collector meets it: in a
    later test's event loop, where its connections' loop is gone, and the failed close is logged there
    ("Task exception was never retrieved"), into that test's log records (a CI run's hostile-upload-name
    test counted that line as one of its own)."""
    yield
    while _OPENED:
        await _OPENED.pop().close()


def turn_texts(fake: FakeAnthropic, index: int = -1) -> str:
    """Everything the model was sent for a conversation turn: system prompt and messages."""
    body = fake.turn_requests()[index]
    return fake.system_of(body) + "\n" + "\n".join(
        m["content"] if isinstance(m["content"], str) else " ".join(p.get("text", "") for p in m["content"])
        for m in body["messages"]
    )
