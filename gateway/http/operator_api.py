"""The daemon's operator API: what ``kith context`` and ``kith memory`` ask while the daemon holds the index.

``POST /context`` ``{"user", "message", "channel"?, "conversation"?, "tier"?}`` -> the exact prompt that
message would get (``gateway.explain``, nothing written);
``POST /memory/search`` ``{"user", "query", "k", "kinds"?}`` -> ``{"hits": [...]}``; ``GET /memory/stats``;
``POST /memory/reindex`` ``{"user"?}`` -> ``{"queued": [scopes]}`` (rebuilds run as ``memory.rebuild``
jobs). Operator auth as every operator endpoint (``gateway/http/auth.py``); POST bodies are JSON with
``Content-Type: application/json`` (``gateway/http/guard.py``, docs/security.md).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.explain import ExplainError, explain
from gateway.http.auth import require_operator
from gateway.http.guard import json_object
from gateway.identity.people_api import people_routes
from gateway.memory.files.scopes import ScopeError, user_scope

if TYPE_CHECKING:
    from gateway.app import Gateway


def routes(gateway: Gateway) -> list[web.RouteDef]:
    def memory() -> Any:
        if gateway.memory is None or gateway.memory.detached:
            raise web.HTTPServiceUnavailable(text="this process has no memory index")
        return gateway.memory

    async def context(request: web.Request) -> web.Response:
        require_operator(request)
        body = await json_object(request)
        if not all(isinstance(body.get(k), str) for k in ("user", "message")):
            raise web.HTTPBadRequest(text='want {"user": ..., "channel": ..., "message": ...}')
        tier = body.get("tier")
        try:
            result = await explain(
                gateway, user_id=body["user"], channel=str(body.get("channel") or "websocket"), text=body["message"],
                conversation=str(body.get("conversation") or ""), tier=int(tier) if tier is not None else None,
            )
        except (ExplainError, ValueError) as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        return web.json_response(result)

    async def search(request: web.Request) -> web.Response:
        require_operator(request)
        body = await json_object(request)
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
        require_operator(request)
        return web.json_response(await memory().report())

    async def reindex(request: web.Request) -> web.Response:
        require_operator(request)
        body = await json_object(request)
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

    return [
        web.post("/context", context),
        web.post("/memory/search", search),
        web.get("/memory/stats", stats),
        web.post("/memory/reindex", reindex),
        *people_routes(gateway),
    ]
