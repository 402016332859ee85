"""Asking the running daemon's operator API from a CLI command (it holds the live memory index).

Every request carries the operator credential (``gateway/http/auth.py``): ``server.token``, else the
``operator.token`` file the daemon created in the configured data dir. No credential means no daemon
has served this data dir, so the daemon is not asked at all (and a daemon of another data dir that
happens to listen on the same port is never talked to with our data).
"""

from __future__ import annotations

from typing import Any

import aiohttp

from gateway.config import Config
from gateway.http.auth import OperatorTokenError, read_operator_token, token_path


class DaemonError(RuntimeError):
    """The daemon answered, but not with success; the message is its answer."""


def daemon_url(config: Config, path: str) -> str:
    host = config.server.host
    host = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else ("::1" if host == "::" else host)
    return f"http://{'[' + host + ']' if ':' in host else host}:{config.server.port}{path}"


async def ask_daemon(config: Config, method: str, path: str, body: dict[str, Any] | None = None) -> Any | None:
    """The daemon's JSON answer, or None when no daemon serves this data dir on ``server.port``."""
    if config.server.port == 0:
        return None  # "pick a free port": there is no known port to ask
    try:
        token = read_operator_token(config)
    except OperatorTokenError as exc:
        raise DaemonError(str(exc)) from None
    if token is None:
        return None
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http,
            http.request(method, daemon_url(config, path), json=(body or {}) if method != "GET" else None,
                         headers=headers) as resp,
        ):
            if resp.status == 401:
                where = "server.token" if config.server.token is not None else str(token_path(config))
                raise DaemonError(f"the daemon on port {config.server.port} refused the operator token from "
                                  f"{where}: it serves another data dir or configuration")
            if resp.status >= 300:
                raise DaemonError(f"the daemon answered {resp.status}: {(await resp.text()).strip()}")
            return await resp.json()
    except aiohttp.ClientConnectionError:
        return None
