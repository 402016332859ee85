"""Serving a fake platform: an aiohttp app on a free loopback port, as every fake needs."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    """Start ``app`` on 127.0.0.1 at a free port; returns the runner (``cleanup()`` it) and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
