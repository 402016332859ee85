"""A minimal host for adapter unit tests: records inbound messages and answers with an echo.

Used only to test an adapter against its platform fake in isolation (parsing, signing, splitting,
retries). Everything that involves the turn pipeline runs through the real ``Gateway`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gateway.config import Config
from gateway.configread import parse_config
from gateway.types import InboundMessage, Reply
from tests.fakes.serve import arrived


@dataclass
class StubGateway:
    """Used as ``async with``: what it started (adapters, webhook servers) is stopped at the end."""

    config: Config
    inbound: list[InboundMessage] = field(default_factory=list)
    answer: Callable[[InboundMessage], Awaitable[str | None]] | None = None  # the turn; default echoes
    _cleanup: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    @classmethod
    def with_channels(cls, tmp_path: Any, **channels: Any) -> StubGateway:
        return cls(parse_config({"data_dir": str(tmp_path), "channels": channels}, env={}))

    async def __aenter__(self) -> StubGateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._cleanup.aclose()

    async def handle_inbound(self, message: InboundMessage, *, on_delta: Any = None) -> Reply | None:
        self.inbound.append(message)
        text = await self.answer(message) if self.answer else f"echo: {message.text}"
        if text is None:
            return None
        return Reply(text=text)

    async def wait_inbound(self, count: int, timeout: float = 30.0) -> list[InboundMessage]:
        return await arrived(self.inbound, count, "messages handed to the host", timeout)

    def start(self, adapter: Any) -> asyncio.Task[None]:
        """Run ``adapter`` as the supervisor does: ``run()`` in a task, until ``stop()`` at the end."""
        task = asyncio.create_task(adapter.run())
        self._cleanup.push_async_callback(_stop, adapter, task)
        return task

    async def mount(self, adapter: Any) -> TestClient[web.Request, web.Application]:
        """A client of an HTTP server with the adapter's routes (its webhooks), as the gateway mounts them."""
        app = web.Application()
        app.add_routes(adapter.routes())
        client: TestClient[web.Request, web.Application] = TestClient(TestServer(app))
        await client.start_server()
        self._cleanup.push_async_callback(client.close)
        return client


async def _stop(adapter: Any, task: asyncio.Task[None]) -> None:
    if task.done():
        return  # it ended during the test, which held the task and so had its outcome to check
    await adapter.stop()
    # stop() must make run() return, as the supervisor relies on: a hang or an error fails the test.
    await asyncio.wait_for(task, 10)
