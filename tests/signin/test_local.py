"""Loopback without ``server.token``: the single local user is signed in automatically, as the same user
the WebSocket hello of that client_id gets. Refused when a token is configured or the request did not
come to a loopback name."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from gateway.http.principal import SESSION_COOKIE, csrf_for
from gateway.testing import test_config
from tests.conftest import WSClient
from tests.signin.rig import browser, daemon, person, session_cookie, set_cookie, sign_in, url

TOKEN = "operator-token-for-tests-0123456789"


async def test_local_sign_in_is_the_websocket_clients_user_with_the_operator_role(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw, browser() as http:
        async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc", "name": "Al"}) as resp:
            assert resp.status == 200
            body = await resp.json()
            morsel = set_cookie(resp)[SESSION_COOKIE]
        assert morsel["httponly"] is True and morsel["samesite"] == "Strict"
        assert body["operator"] is True
        secret = session_cookie(http)
        assert secret is not None and body["csrf"] == csrf_for(secret)
        # The WebSocket hello of the same client_id lands on the same user (and no second one exists).
        ws = await http.ws_connect(url(gw, "/ws"))
        try:
            ready = await WSClient(ws).hello("web-abc", "Al")
        finally:
            await ws.close()
        assert ready["type"] == "ready" and ready["user_id"] == body["user_id"]
        assert [u.user_id for u in gw.state.users.all()] == [body["user_id"]]
        async with http.get(url(gw, "/t/whoami")) as resp:
            assert await resp.json() == {"user_id": body["user_id"], "operator": True, "via": "cookie"}


async def test_bad_client_ids_are_refused(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw, browser() as http:
        for bad in ({}, {"client_id": ""}, {"client_id": "a b"}, {"client_id": "x" * 129}, {"client_id": 7},
                    {"client_id": "ok", "name": "n" * 101}):
            async with http.post(url(gw, "/api/session/local"), json=bad) as resp:
                assert resp.status == 400, bad
        assert gw.state.users.all() == []


async def test_refused_when_a_token_is_configured(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data", server={"port": 0, "token": TOKEN})) as gw, browser() as http:
        async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc"}) as resp:
            assert resp.status == 403 and SESSION_COOKIE not in resp.cookies
        assert gw.state.users.all() == []


async def test_refused_over_a_non_loopback_host(tmp_path: Path) -> None:
    cfg = test_config(tmp_path / "data", server={"port": 0, "public_names": ["kith.lan"]})
    async with daemon(cfg) as gw, browser() as http:
        for host in ("kith.lan", f"kith.lan:{gw.port}"):
            async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc"},
                                 headers={"Host": host}) as resp:
                assert resp.status == 403, host
                assert SESSION_COOKIE not in resp.cookies
        assert gw.state.users.all() == []
        # A proxied request is refused by the guard before that (no token: proxies are not allowed).
        async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc"},
                             headers={"X-Forwarded-For": "203.0.113.9"}) as resp:
            assert resp.status == 403
        # A local session holds only where it was granted: the same cookie over the LAN name is nobody.
        async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc"}) as resp:
            assert resp.status == 200
        async with http.get(url(gw, "/t/whoami"), headers={"Host": "kith.lan"}) as resp:
            assert resp.status == 401
        async with http.get(url(gw, "/t/whoami")) as resp:
            assert resp.status == 200


async def test_a_cross_site_page_cannot_sign_itself_in(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw, aiohttp.ClientSession() as http:
        for headers in ({"Origin": "https://evil.example"}, {"Content-Type": "text/plain"}):
            kwargs = {"data": '{"client_id": "x"}'} if "Content-Type" in headers else {"json": {"client_id": "x"}}
            async with http.post(url(gw, "/api/session/local"), headers=headers, **kwargs) as resp:
                assert resp.status in (403, 415) and SESSION_COOKIE not in resp.cookies
        assert gw.state.users.all() == []


async def test_a_browser_already_signed_in_keeps_its_session(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw, browser() as http:
        async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc"}) as resp:
            first = await resp.json()
        secret = session_cookie(http)
        async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc"}) as resp:
            second = await resp.json()
            assert SESSION_COOKIE not in resp.cookies
        assert session_cookie(http) == secret and second == first
        # The first tab's CSRF token still works.
        async with http.post(url(gw, f"/t/users/{first['user_id']}/notes"), json={"text": "x"},
                             headers={"X-CSRF-Token": first["csrf"]}) as resp:
            assert resp.status == 200
        # A browser signed in by a link keeps that session too (the page asks on every load).
        bob = await person(gw, "bob")
        csrf = await sign_in(gw, http, bob)
        async with http.post(url(gw, "/api/session/local"), json={"client_id": "web-abc"}) as resp:
            assert await resp.json() == {"user_id": bob, "operator": False, "csrf": csrf}
            assert SESSION_COOKIE not in resp.cookies
        async with http.get(url(gw, "/t/whoami")) as resp:
            assert (await resp.json())["user_id"] == bob
