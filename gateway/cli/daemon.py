"""Asking the running daemon's operator API from a CLI command (it holds the live memory index)."""

from __future__ import annotations

from typing import Any

import aiohttp

from gateway.config import Config


class DaemonError(RuntimeError):
    """The daemon answered, but not with success; the message is its answer."""


def daemon_url(config: Config, path: str) -> str:
    host = config.server.host
    host = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else ("::1" if host == "::" else host)
    return f"http://{'[' + host + ']' if ':' in host else host}:{config.server.port}{path}"


async def ask_daemon(config: Config, method: str, path: str, body: dict[str, Any] | None = None) -> Any | None:
    """The daemon's JSON answer, or None when no daemon listens on ``server.port``."""
    headers = {"Authorization": f"Bearer {config.server.token.get_secret_value()}"} if config.server.token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http,
            http.request(method, daemon_url(config, path), json=body, headers=headers) as resp,
        ):
            if resp.status >= 300:
                raise DaemonError(f"the daemon answered {resp.status}: {(await resp.text()).strip()}")
            return await resp.json()
    except aiohttp.ClientConnectionError:
        return None
