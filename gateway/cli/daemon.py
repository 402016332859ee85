"""Asking the running daemon's API (``/api``, docs/api.md) from a CLI command: it holds the live memory
index, the job bus and the caches.

Every request carries the operator credential (``gateway/http/auth.py``): ``server.token``, else the
``operator.token`` file the daemon created in the configured data dir. No credential means no daemon
has served this data dir, so the daemon is not asked at all (and a daemon of another data dir that
happens to listen on the same port is never talked to with our data).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp

from gateway.config import Config
from gateway.http.auth import OperatorTokenError, read_operator_token, token_path

if TYPE_CHECKING:  # imported where used: the CLI starts without the memory stack
    from gateway.memory.search.recall import Hit


class DaemonError(RuntimeError):
    """The daemon answered, but not with success; the message is its answer, ``status`` its status."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def user_path(uid: str, rest: str = "") -> str:
    """``/api/users/<uid><rest>`` with the id quoted (a path segment, whatever the operator typed)."""
    return f"/api/users/{quote(uid, safe='')}{rest}"


async def recall_hits(config: Config, user: str, query: str, k: int, kinds: tuple[str, ...] = (),
                      filters: dict[str, str] | None = None) -> list[Hit] | None:
    """``GET /api/users/{uid}/recall`` on the daemon, as the recall hits ``MemoryService.recall`` gives
    in-process; None when no daemon answers. A user the daemon does not know has no memories, as
    when the CLI searches the index itself."""
    from gateway.memory.search.recall import Hit

    params = {"q": query, "k": str(k), **({"kinds": ",".join(kinds)} if kinds else {}),
              **{key: value for key, value in (filters or {}).items() if value}}  # topic, entity, since
    try:
        out = await ask_daemon(config, "GET", user_path(user, "/recall"), params=params)
    except DaemonError as exc:
        if exc.status == 404:
            return []
        raise
    if out is None:
        return None
    return [Hit(text=h["text"], source=h["path"], scope=h["scope"], date=h["date"], score=h["score"],
                chunk_id=h["ref"], turn_ids=tuple(h["turn_ids"]), kind=h["kind"], speaker=h["speaker"],
                channel=h["channel"], session_id=h["session_id"], topic=h.get("topic", ""),
                entities=tuple(h.get("entities", ()))) for h in out["hits"]]  # fmt: skip


async def _error_text(resp: aiohttp.ClientResponse) -> str:
    """The message of an /api error (``{"error", "message"}``), or the body as sent."""
    text = (await resp.text()).strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    return str(data.get("message") or text) if isinstance(data, dict) else text


def daemon_url(config: Config, path: str) -> str:
    host = config.server.host
    host = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else ("::1" if host == "::" else host)
    return f"http://{'[' + host + ']' if ':' in host else host}:{config.server.port}{path}"


async def ask_daemon(config: Config, method: str, path: str, body: dict[str, Any] | None = None, *,
                     params: dict[str, str] | None = None) -> Any | None:  # fmt: skip
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
                         params=params, headers=headers) as resp,
        ):
            if resp.status == 401:
                where = "server.token" if config.server.token is not None else str(token_path(config))
                raise DaemonError(f"the daemon on port {config.server.port} refused the operator token from "
                                  f"{where}: it serves another data dir or configuration", 401)
            if resp.status >= 300:
                raise DaemonError(f"the daemon answered {resp.status}: {await _error_text(resp)}", resp.status)
            return await resp.json()
    except aiohttp.ClientConnectionError:
        return None
