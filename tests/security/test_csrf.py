"""Issue 12, item 2: cross-site requests.

An HTML form or a "simple" ``fetch()`` from any web page can POST ``text/plain``,
``application/x-www-form-urlencoded`` or ``multipart/form-data`` to the daemon without a CORS
preflight; ``request.json()`` parsed those bodies anyway, so four such requests forced a distillation
tier that is off by default. State-changing endpoints now take ``application/json`` only (415), and a
request whose ``Origin`` is not one of ours is refused (403), whatever else it carries. Nothing is
queued, run or changed by a refused request.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import make_mocked_request

from tests.conftest import GatewayFactory
from tests.security.guarded_daemon import footprint, idle_bus, operator_auth, web_user


def state_changing(user: str) -> list[tuple[str, str]]:
    """(method, path) of the operator routes that queue jobs, erase or run the context stages."""
    return [("POST", "/api/memory/reindex"), *(("POST", f"/api/users/{user}/distill/{t}") for t in ("short", "mid",
            "long")), ("POST", f"/api/users/{user}/context"), ("DELETE", f"/api/users/{user}")]  # fmt: skip


SAID = "I keep my passport in the blue drawer."


def _cross_site_bodies(user: str) -> list[tuple[str, dict[str, Any]]]:
    """What a page can send without a preflight: the three form encodings, and no type at all."""
    form = aiohttp.FormData()
    form.add_field("user", user)
    form.add_field("file", b'{"user": "%s"}' % user.encode(), filename="x.json", content_type="application/json")
    return [
        ("text/plain", {"data": f'{{"user": "{user}", "query": "passport", "message": "hi"}}',
                        "headers": {"Content-Type": "text/plain;charset=UTF-8"}}),
        ("urlencoded form", {"data": {"user": user}}),
        ("multipart form", {"data": form}),
        ("no content type", {"data": b""}),
        ("json lookalike", {"data": f'{{"user": "{user}"}}', "headers": {"Content-Type": "text/json"}}),
        ("json suffix", {"data": f'{{"user": "{user}"}}', "headers": {"Content-Type": "application/json-patch+json"}}),
    ]


async def test_form_and_text_posts_are_refused_and_change_nothing(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(**idle_bus())
    user = await web_user(gw, "bo-web", "Bo", SAID)
    auth = operator_auth(gw)
    before = await footprint(gw)
    async with aiohttp.ClientSession() as http:
        for method, path in state_changing(user):
            for label, kwargs in _cross_site_bodies(user):
                # Even holding the operator credential, a non-JSON POST is refused: the content type
                # alone stops the forms and simple requests a page can send.
                headers = {**auth, **kwargs.get("headers", {})}
                async with http.request(method, f"http://127.0.0.1:{gw.port}{path}", data=kwargs["data"],
                                        headers=headers) as resp:
                    assert resp.status == 415, (path, label, resp.status)
                    assert "application/json" in await resp.text()
                # And without it (all a cross-site page has), the request is refused before parsing.
                async with http.request(method, f"http://127.0.0.1:{gw.port}{path}", data=kwargs["data"],
                                        headers=kwargs.get("headers", {})) as resp:
                    assert resp.status in (401, 415), (path, label, resp.status)
    assert await footprint(gw) == before


async def test_a_foreign_origin_is_refused_even_with_json_and_the_token(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(**idle_bus())
    user = await web_user(gw, "bo-web", "Bo", SAID)
    auth = operator_auth(gw)
    before = await footprint(gw)
    foreign = ["https://evil.example", f"http://evil.example:{gw.port}", "null", f"http://127.0.0.1:{gw.port + 1}",
               f"http://localhost:{gw.port}.evil.example", f"file://{gw.port}", f"http://127.0.0.1:{gw.port}/x"]
    async with aiohttp.ClientSession() as http:
        for method, path in state_changing(user):
            for origin in foreign:
                async with http.request(method, f"http://127.0.0.1:{gw.port}{path}", json={"message": "hi"},
                                        headers={**auth, "Origin": origin}) as resp:
                    assert resp.status == 403, (path, origin, resp.status)
        for origin in foreign:
            async with http.get(f"http://127.0.0.1:{gw.port}/api/memory/stats",
                                headers={**auth, "Origin": origin}) as r:
                assert r.status == 403, origin
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"http://127.0.0.1:{gw.port}/ws", headers={"Origin": origin})
            assert refused.value.status == 403
    assert await footprint(gw) == before
    assert gw.adapters["websocket"].health()["connections"] == 0


async def test_our_own_origins_and_json_are_served(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(**idle_bus(allowed_origins=["https://chat.example.org"]))
    user = await web_user(gw, "bo-web", "Bo", SAID)
    auth = operator_auth(gw)
    before = await footprint(gw)
    own = [None, f"http://127.0.0.1:{gw.port}", f"http://localhost:{gw.port}", f"http://[::1]:{gw.port}",
           "https://chat.example.org"]
    async with aiohttp.ClientSession() as http:
        for origin in own:
            headers = {**auth, **({"Origin": origin} if origin else {})}
            async with http.post(f"http://127.0.0.1:{gw.port}/api/users/{user}/distill/long", json={},
                                 headers={**headers, "Content-Type": "application/json; charset=utf-8"}) as resp:
                assert resp.status == 202, (origin, await resp.text())
            ws = await http.ws_connect(f"http://127.0.0.1:{gw.port}/ws",
                                       headers={"Origin": origin} if origin else {})
            await ws.close()
        async with http.post(f"http://127.0.0.1:{gw.port}/api/users/{user}/context", data=b"not json",
                             headers={**auth, "Content-Type": "application/json"}) as resp:
            assert resp.status == 400
    assert (await footprint(gw)).queued["distill_long"] == before.queued["distill_long"] + len(own)


async def test_websocket_origin_is_never_compared_with_the_requests_own_host(make_gateway: GatewayFactory) -> None:
    """The old check accepted any Origin equal to ``http://<Host>``: on a rebound name both are the
    attacker's. The adapter's own check (behind the guard) must refuse it too."""
    gw = await make_gateway()
    adapter: Any = gw.adapters["websocket"]
    for host in (f"evil.example:{gw.port}", "evil.example"):
        request = make_mocked_request("GET", "/ws", headers={"Host": host, "Origin": f"http://{host}"}, app=gw.http_app)
        assert not adapter._origin_ok(request), host
    request = make_mocked_request("GET", "/ws", headers={"Host": "evil.example", "Origin": f"http://localhost:{gw.port}"},
                                  app=gw.http_app)
    assert adapter._origin_ok(request)


async def test_no_other_site_may_frame_or_embed_the_daemons_pages(make_gateway: GatewayFactory) -> None:
    """A foreign page could frame the web chat (same-origin inside the frame, so its WebSocket is
    allowed) and trick the user into typing; every answer forbids framing and cross-site embedding."""
    gw = await make_gateway()
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/static/app.js", "/healthz", "/api/memory/stats"):
            async with http.get(f"http://127.0.0.1:{gw.port}{path}") as resp:
                assert resp.headers.get("X-Frame-Options") == "DENY", path
                assert resp.headers.get("Cross-Origin-Resource-Policy") == "same-origin", path
