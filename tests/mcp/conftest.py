"""Fixtures for MCP: the test server (tests/mcp/mcp_server.py, a real MCPServer process) over stdio or
streamable HTTP on a free port, and a fake Anthropic model whose unscripted answers repeat the tool
results it was sent, so a reply shows that the model used what the tool returned."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic import API_KEY, FakeAnthropic

SERVER = Path(__file__).with_name("mcp_server.py")
HTTP_TOKEN = "Bearer mcp-test-token-0123456789"


class ReadingModel(FakeAnthropic):
    """Answers a round that carries tool results with those results (what a model that read them says)."""

    @staticmethod
    def _default_text(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"] if body.get("messages") else ""
        if isinstance(last, list):
            results = [b.get("content") for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
            texts = [r if isinstance(r, str) else " ".join(p.get("text", "") for p in r) for r in results if r]
            if texts:
                return "From the tool: " + " | ".join(texts)
        return FakeAnthropic._default_text(body)


@pytest.fixture
async def model() -> AsyncIterator[ReadingModel]:
    fake = await ReadingModel().start()
    yield fake
    await fake.stop()


@pytest.fixture
def llm(model: ReadingModel) -> dict[str, Any]:
    return {"provider": "anthropic", "api_key": API_KEY, "base_url": model.base_url, "max_retries": 0, "timeout_s": 20}


def stdio_server(**extra: Any) -> dict[str, Any]:
    """A stdio server entry for ``mcp.servers``."""
    return {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)], **extra}


def mcp_section(servers: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"servers": servers, "ping_interval_s": 0.3, "restart_base_delay_s": 0.05, "restart_max_delay_s": 0.5,
            "startup_wait_s": 30, **extra}


@pytest.fixture
async def http_server() -> AsyncIterator[Callable[[], str]]:
    """Starts the server over streamable HTTP (127.0.0.1, port 0, ``Authorization`` required); the
    fixture's value returns its URL."""
    env = {**os.environ, "MCP_TEST_TOKEN": HTTP_TOKEN}
    proc = await asyncio.create_subprocess_exec(sys.executable, str(SERVER), "http", env=env,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    assert line.startswith("PORT "), line
    url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    yield lambda: url
    proc.kill()
    await proc.wait()
