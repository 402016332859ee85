"""The daemon's operator API for memory: what ``kith memory`` asks while the daemon holds the index.

``POST /memory/search`` ``{"user", "query", "k", "kinds"?}`` -> ``{"hits": [...]}``; ``GET /memory/stats``;
``POST /memory/reindex`` ``{"user"?}`` -> ``{"queued": [scopes]}`` (rebuilds run as ``memory.rebuild``
jobs). Operator auth as every operator endpoint (``gateway/httpauth.py``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.httpauth import require_operator
from gateway.memory.scopes import ScopeError, user_scope

if TYPE_CHECKING:
    from gateway.app import Gateway


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="body must be JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="body must be a JSON object")
    return body


def routes(gateway: Gateway) -> list[web.RouteDef]:
    def memory() -> Any:
        if gateway.memory is None or gateway.memory.detached:
            raise web.HTTPServiceUnavailable(text="this process has no memory index")
        return gateway.memory

    async def search(request: web.Request) -> web.Response:
        require_operator(gateway.config, request)
        body = await _body(request)
        user, query, k, kinds = body.get("user"), body.get("query"), body.get("k", 8), body.get("kinds", [])
        if (not isinstance(user, str) or not isinstance(query, str) or not isinstance(k, int) or not 0 < k <= 100
                or not isinstance(kinds, list) or not all(isinstance(x, str) for x in kinds)):
            raise web.HTTPBadRequest(text='want {"user": str, "query": str, "k": 1..100, "kinds": [str]?}')
        try:
            hits = await memory().recall(scope=user_scope(user), query=query, k=k, kinds=kinds)
        except ScopeError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        return web.json_response({"hits": [asdict(h) for h in hits]})

    async def stats(request: web.Request) -> web.Response:
        require_operator(gateway.config, request)
        return web.json_response(await memory().report())

    async def reindex(request: web.Request) -> web.Response:
        require_operator(gateway.config, request)
        body = await _body(request)
        user = body.get("user")
        if user is not None and not isinstance(user, str):
            raise web.HTTPBadRequest(text='want {"user": str} or {}')
        mem, bus = memory(), gateway.bus
        if bus is None:
            raise web.HTTPServiceUnavailable(text="the job bus is not running")
        try:
            scopes = [user_scope(user)] if user else mem.known_scopes()
            for scope in scopes:
                mem.root_for(scope)
        except ScopeError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        for scope in scopes:
            await bus.enqueue("memory.rebuild", {"scope": scope})
        return web.json_response({"queued": scopes}, status=202)

    return [web.post("/memory/search", search), web.get("/memory/stats", stats), web.post("/memory/reindex", reindex)]
