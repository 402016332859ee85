"""Fixtures for the provider tests: fake OpenAI-compatible servers on port 0."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def fake_openai_cheap() -> AsyncIterator[FakeOpenAI]:
    """A second server, for a role pointing elsewhere than ``main``."""
    async with FakeOpenAI(name="fake-cheap", api_key="sk-cheap-key") as fake:
        yield fake
