"""Serving a fake platform: an aiohttp app on a free loopback port, as every fake needs, and waiting
for what the bot under test sent it."""

from __future__ import annotations

import asyncio
import time
from typing import Self, TypeVar

from aiohttp import web

T = TypeVar("T")


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    """Start ``app`` on 127.0.0.1 at a free port; returns the runner (``cleanup()`` it) and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


class FakeServer:
    """A platform fake's HTTP side: ``start()`` serves the routes of ``add_routes`` at ``base_url``,
    ``close()`` stops serving; or ``async with`` for both. Subclasses are dataclasses holding what
    the bot did."""

    base_url: str = ""
    _runner: web.AppRunner | None = None

    def add_routes(self, router: web.UrlDispatcher) -> None:
        raise NotImplementedError

    async def start(self) -> str:
        app = web.Application()
        self.add_routes(app.router)
        self._runner, port = await serve(app)
        self.base_url = f"http://127.0.0.1:{port}"
        return self.base_url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def arrived(items: list[T], count: int, what: str, timeout: float = 30.0) -> list[T]:
    """``items`` once it holds ``count`` entries (a fake or stub appends to it as requests come in);
    TimeoutError saying how many of ``what`` came, if they do not come in time."""
    deadline = time.monotonic() + timeout
    while len(items) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(items)} of {count} {what}")
        await asyncio.sleep(0.02)
    return items
