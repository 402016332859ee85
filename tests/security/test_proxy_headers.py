"""Issue 12, item 3: behind a reverse proxy every request comes from 127.0.0.1.

A proxy that forwards the internet to a token-less daemon made loopback meaningless: the operator API
and ``/ws`` (with no token, a trusted channel that skips pairing) were open to anyone. Without
``server.token`` the daemon now refuses any request that carries the headers proxies add (403, pointing
to docs/security.md#proxies); with a token, proxied requests are served and authenticated as usual.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.app import Gateway
from tests.conftest import GatewayFactory
from tests.fakes.serve import serve
from tests.security.guarded_daemon import every_route, footprint, idle_bus, operator_token

PROXY_HEADERS = [
    {"X-Forwarded-For": "203.0.113.9"}, {"X-Forwarded-Proto": "https"}, {"X-Forwarded-Host": "kith.example.org"},
    {"Forwarded": "for=203.0.113.9;proto=https"}, {"X-Real-IP": "203.0.113.9"}, {"x-forwarded-port": "443"},
    {"CF-Connecting-IP": "203.0.113.9"}, {"True-Client-IP": "203.0.113.9"}, {"Via": "1.1 proxy"},
]


class ForwardingProxy:
    """A minimal reverse proxy as Caddy, Traefik or a typical nginx site config behaves: it forwards
    every request to the daemon on loopback, adding X-Forwarded-For / -Proto / -Host."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = f"http://127.0.0.1:{upstream_port}"
        self.http = aiohttp.ClientSession(auto_decompress=False)

    async def handle(self, request: web.Request) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        headers.update({"X-Forwarded-For": request.remote or "", "X-Forwarded-Proto": "https",
                        "X-Forwarded-Host": request.host})
        async with self.http.request(request.method, self.upstream + request.path_qs, headers=headers,
                                     data=await request.read()) as resp:
            return web.Response(status=resp.status, body=await resp.read(),
                                content_type=resp.content_type)


@pytest.fixture
async def proxied() -> AsyncIterator[Any]:
    started: list[tuple[ForwardingProxy, Any]] = []

    async def start(gw: Gateway) -> str:
        proxy = ForwardingProxy(gw.port or 0)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", proxy.handle)
        runner, port = await serve(app)
        started.append((proxy, runner))
        return f"http://127.0.0.1:{port}"

    yield start
    for proxy, runner in started:
        await proxy.http.close()
        await runner.cleanup()


async def test_without_a_token_proxied_requests_are_refused_on_every_route(
    make_gateway: GatewayFactory, proxied: Any
) -> None:
    gw = await make_gateway(**idle_bus())
    token = operator_token(gw)
    before = await footprint(gw)
    base = await proxied(gw)
    async with aiohttp.ClientSession() as http:
        for method, path in every_route(gw.http_app):
            async with http.request(method, base + path, headers={"Authorization": f"Bearer {token}"},
                                    json={"user": "x"} if method == "POST" else None) as resp:
                assert resp.status == 403, (method, path, resp.status)
                assert "docs/security.md#proxies" in await resp.text()
        for extra in PROXY_HEADERS:
            async with http.get(f"http://127.0.0.1:{gw.port}/api/memory/stats",
                                headers={"Authorization": f"Bearer {token}", **extra}) as resp:
                assert resp.status == 403, extra
            # /ws with no server.token is a trusted channel that skips pairing: never through a proxy.
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"http://127.0.0.1:{gw.port}/ws", headers=extra)
            assert refused.value.status == 403
    assert await footprint(gw) == before
    assert gw.adapters["websocket"].health()["connections"] == 0


async def test_with_a_token_proxied_requests_are_served_and_authenticated(
    make_gateway: GatewayFactory, proxied: Any
) -> None:
    secret = "proxy-deployment-token-0123456789"
    gw = await make_gateway(**idle_bus(token=secret))
    base = await proxied(gw)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/healthz") as resp:
            assert resp.status == 200
        async with http.get(f"{base}/api/memory/stats") as resp:
            assert resp.status == 401
        async with http.get(f"{base}/api/memory/stats", headers={"Authorization": f"Bearer {secret}"}) as resp:
            assert resp.status == 200
        # The WebSocket through a proxy must authenticate like any other client.
        ws = await http.ws_connect(f"http://127.0.0.1:{gw.port}/ws", headers={"X-Forwarded-For": "203.0.113.9"})
        await ws.send_json({"type": "hello", "client_id": "intruder"})
        frame = json.loads((await ws.receive(timeout=10)).data)
        assert frame["type"] == "error" and frame["code"] == "unauthorized"
        await ws.receive(timeout=10)
        assert ws.close_code == 4401
        ws = await http.ws_connect(f"http://127.0.0.1:{gw.port}/ws",
                                   headers={"X-Forwarded-For": "203.0.113.9", "Authorization": f"Bearer {secret}"})
        await ws.send_json({"type": "hello", "client_id": "owner"})
        assert json.loads((await ws.receive(timeout=10)).data)["type"] == "ready"
        await ws.close()
