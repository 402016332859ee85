"""Shutdown ends an MCP server's connection task even when the SDK turns the cancel into an error.

Regression (issue 26's flake hunt): a test gateway did not close within 60 s. Its MCP servers' tasks
were inside the SDK's ``Client.__aenter__`` (an anyio task group starting) when shutdown cancelled
them; the cancel came back as an ordinary error, the connection loop took it for a failed
connection and went on reconnecting, and ``stop()`` waited for it forever.
"""

from __future__ import annotations

import asyncio
import time

import pytest

import gateway.mcp.server as server_module
from gateway.mcp.server import McpServer, ServerState
from gateway.mcp.settings import McpConfig, McpServerConfig


class CancelTurnedError(McpServer):
    """A connection attempt that, when cancelled, raises what anyio's ``TaskGroup.start`` raises for a
    child cancelled before it started, instead of the cancel."""

    attempts = 0

    async def _connected(self) -> None:
        self.attempts += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("Child exited without calling task_status.started()") from None


async def test_stop_ends_a_server_whose_cancel_came_back_as_an_error() -> None:
    cfg = McpServerConfig(transport="stdio", command="unused")
    mcp_cfg = McpConfig(restart_base_delay_s=0.01, restart_max_delay_s=0.02)
    server = CancelTurnedError("stuck", cfg, mcp_cfg, on_tools=lambda _: None)
    server.start()
    await asyncio.sleep(0.05)
    assert server.attempts == 1
    started = time.monotonic()
    await asyncio.wait_for(server.stop(), 10)  # before the fix: reconnected until this bound
    assert time.monotonic() - started < 2
    assert server.state is ServerState.STOPPED
    await asyncio.sleep(0.1)
    assert server.attempts == 1, "the server connected again after stop()"


class CancelAbsorbed(McpServer):
    """A connection attempt that swallows its first cancel without a trace and goes on waiting."""

    async def _connected(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.Event().wait()


async def test_a_cancel_absorbed_without_an_error_gets_a_second_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "STOP_WAIT_S", 0.2)
    server = CancelAbsorbed("deaf", McpServerConfig(transport="stdio", command="unused"), McpConfig(),
                            on_tools=lambda _: None)
    server.start()
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await asyncio.wait_for(server.stop(), 10)
    assert time.monotonic() - started < 1.5
    assert server.state is ServerState.STOPPED
