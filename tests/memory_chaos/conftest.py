"""The fake model every chaos run talks to (the OpenAI wire protocol, answering by request kind)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
async def chaos_model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake
