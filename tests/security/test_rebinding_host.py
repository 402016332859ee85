"""Issue 12, item 1: DNS rebinding.

A page on ``evil.example`` whose DNS name the attacker re-points at 127.0.0.1 talks to the daemon as
"same origin": its requests come from loopback and carry ``Host: evil.example:PORT``. Every route must
refuse that Host before any handler runs (the WebSocket upgrade included), and loopback alone is no
credential for the operator's routes under ``/api``: they need the operator token.
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any

import aiohttp
import pytest

from gateway.app import Gateway
from gateway.config import ConfigError
from gateway.configread import parse_config
from gateway.http.auth import TOKEN_FILE
from gateway.http.guard import Policy
from tests.conftest import GatewayFactory, make_config
from tests.security.guarded_daemon import every_route, footprint, idle_bus, operator_auth, operator_token, web_user

EVIL = "evil.example"
# The routes that read or change a person's data for the operator (and recall, a person's own), as
# (method, path) with {user} for the user id: what the CLI calls on a running daemon.
OPERATOR_ROUTES = {("POST", "/api/users/{user}/context"), ("GET", "/api/users/{user}/recall"),
                   ("GET", "/api/memory/stats"), ("POST", "/api/memory/reindex"),
                   ("POST", "/api/users/{user}/distill/long"), ("GET", "/api/distill"),
                   ("DELETE", "/api/users/{user}")}  # fmt: skip


async def _with_user(gw: Gateway) -> str:
    return await web_user(gw, "ada-web", "Ada", "My boat is moored at pier 17.")


def _request(method: str, path: str, user: str) -> dict[str, Any]:
    """``http.request`` arguments of an operator route for ``user``: the URL's path, query and body."""
    path = path.replace("{user}", user)
    if path.endswith("/context"):
        return {"json": {"message": "where is my boat?"}}
    if path.endswith("/recall"):
        return {"params": {"q": "boat", "k": "3"}}
    if path.endswith("/reindex"):
        return {"json": {"user": user}}
    return {"json": {}} if method != "GET" else {}


async def _raw(port: int, request: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 exchange over a bare socket: header bytes a client library would refuse to send."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        body = await asyncio.wait_for(reader.readexactly(length), 10)
        return int(head.split(b" ", 2)[1]), body
    finally:
        writer.close()


async def test_every_route_refuses_a_rebound_host_even_with_the_operator_token(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(**idle_bus())
    user = await _with_user(gw)
    token = operator_token(gw)
    routes = every_route(gw.http_app)
    assert {(m, p.replace("{user}", "x")) for m, p in OPERATOR_ROUTES} | {("GET", "/healthz"), ("GET", "/"),
                                                                         ("GET", "/ws")} <= set(routes)  # fmt: skip
    before = await footprint(gw)
    hosts = [f"{EVIL}:{gw.port}", EVIL, f"127.0.0.1.{EVIL}:{gw.port}", f"localhost.{EVIL}", f"{EVIL}.:{gw.port}",
             f"LOCALHOST@{EVIL}:{gw.port}", f"127.0.0.1:{gw.port}.{EVIL}", "[::1]x", f"{EVIL}:{gw.port}:1"]
    statuses: dict[tuple[str, str, str], int] = {}
    async with aiohttp.ClientSession() as http:
        for method, path in routes:
            for host in hosts:
                headers = {"Host": host, "Authorization": f"Bearer {token}"}
                async with http.request(method, f"http://127.0.0.1:{gw.port}{path}", headers=headers,
                                        json={"user": user} if method == "POST" else None) as resp:
                    statuses[(method, path, host)] = resp.status
                    if resp.status == 421:
                        assert "server.public_names" in await resp.text()
        for host in hosts[:2]:  # the upgrade itself is refused: no WebSocket ever exists
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"http://127.0.0.1:{gw.port}/ws", headers={"Host": host})
            assert refused.value.status == 421
    assert {k: s for k, s in statuses.items() if s != 421} == {}
    assert gw.adapters["websocket"].health()["connections"] == 0
    await asyncio.sleep(0.2)
    assert await footprint(gw) == before


async def test_loopback_names_with_the_operator_token_are_served(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(**idle_bus())
    user = await _with_user(gw)
    auth = operator_auth(gw)
    before = await footprint(gw)
    async with aiohttp.ClientSession() as http:
        for host in (f"127.0.0.1:{gw.port}", f"localhost:{gw.port}", f"[::1]:{gw.port}", "LocalHost", "127.0.0.1"):
            async with http.get(f"http://127.0.0.1:{gw.port}/healthz", headers={"Host": host}) as resp:
                assert resp.status == 200, host
            async with http.get(f"http://127.0.0.1:{gw.port}/api/memory/stats",
                                headers={"Host": host, **auth}) as resp:
                assert resp.status == 200, host
        base = f"http://127.0.0.1:{gw.port}"
        async with http.post(f"{base}/api/users/{user}/context", headers=auth,
                             **_request("POST", "/api/users/{user}/context", user)) as resp:
            assert resp.status == 200
            assert any("pier 17" in m["content"] for m in (await resp.json())["messages"])
        async with http.get(f"{base}/api/users/{user}/recall", headers=auth,
                            **_request("GET", "/api/users/{user}/recall", user)) as resp:
            assert resp.status == 200
        async with http.get(f"{base}/api/distill", headers=auth) as resp:
            assert resp.status == 200
        async with http.post(f"{base}/api/users/{user}/distill/long", json={}, headers=auth) as resp:
            assert resp.status == 202
    after = await footprint(gw)
    # The operator's request did queue the forced run: the footprint the other tests compare sees it.
    assert after.queued["distill_long"] == before.queued["distill_long"] + 1


async def test_loopback_without_the_operator_token_gets_401(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(**idle_bus())
    user = await _with_user(gw)
    token = operator_token(gw)
    before = await footprint(gw)
    bad = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {token[:-1]}"},
           {"Authorization": f"Basic {token}"}, {"Authorization": token}, {"Authorization": "Bearer "}]
    async with aiohttp.ClientSession() as http:
        for method, path in sorted(OPERATOR_ROUTES):
            for headers in bad:
                async with http.request(method, f"http://127.0.0.1:{gw.port}{path.replace('{user}', user)}",
                                        headers=headers, **_request(method, path, user)) as resp:
                    assert resp.status == 401, (method, path, headers)
                    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
                    assert "pier 17" not in await resp.text()
    # A token that is not ASCII (or not even UTF-8) is a wrong token, never a server error.
    for value in ("Bearer café".encode(), b"Bearer \xff\xfe" + token.encode(), "Bearer 🔑".encode()):
        status, body = await _raw(gw.port or 0, b"GET /api/memory/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  b"Authorization: " + value + b"\r\nConnection: close\r\n\r\n")
        assert status == 401, (value, body)
    assert await footprint(gw) == before


async def test_the_operator_token_is_created_once_private_and_kept(tmp_path: Any) -> None:
    config = make_config(tmp_path, **idle_bus())
    path = config.data_dir / TOKEN_FILE
    async with Gateway(config, entry_points=False) as gw:
        first = operator_token(gw)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(first) >= 43 and first.replace("-", "").replace("_", "").isalnum()  # 32 random bytes, urlsafe
    async with Gateway(config, entry_points=False) as gw:
        assert operator_token(gw) == first  # kept across restarts: scripts keep working
        async with aiohttp.ClientSession() as http, http.get(
            f"http://127.0.0.1:{gw.port}/api/memory/stats", headers={"Authorization": f"Bearer {first}"}
        ) as resp:
            assert resp.status == 200


async def test_a_configured_server_token_is_the_operator_credential(tmp_path: Any) -> None:
    secret = "configured-server-token-0123456789"
    stale = tmp_path / "data" / TOKEN_FILE
    stale.parent.mkdir(parents=True)
    stale.write_text("an-old-operator-token-from-a-run-without-server-token\n")
    stale.chmod(0o600)
    config = make_config(tmp_path, **idle_bus(token=secret))
    async with Gateway(config, entry_points=False) as gw, aiohttp.ClientSession() as http:
        for token, status in ((secret, 200), (stale.read_text().strip(), 401)):
            async with http.get(f"http://127.0.0.1:{gw.port}/api/distill",
                                headers={"Authorization": f"Bearer {token}"}) as resp:
                assert resp.status == status


async def test_public_names_and_the_webhook_host_are_served(tmp_path: Any) -> None:
    config = make_config(tmp_path, **idle_bus(token="t" * 32, public_names=["Kith.Example.org", "192.0.2.7",
                                                                             "2001:db8::1"]))
    async with Gateway(config, entry_points=False) as gw, aiohttp.ClientSession() as http:
        for host, status in (("kith.example.org", 200), (f"kith.example.org:{gw.port}", 200), ("192.0.2.7:443", 200),
                             ("[2001:db8:0::1]", 200), ("chat.example.org", 421), (EVIL, 421)):
            async with http.get(f"http://127.0.0.1:{gw.port}/healthz", headers={"Host": host}) as resp:
                assert resp.status == status, host
    hooked = parse_config({"server": {"token": "t" * 32}, "channels": {"telegram": {
        "enabled": True, "token": "1:x", "mode": "webhook", "webhook_secret": "s" * 20,
        "webhook_url": "https://Bot.Example.net:8443/telegram/webhook"}}}, env={})
    policy = Policy(hooked)
    assert policy.host_allowed("bot.example.net:8443") and policy.host_allowed("bot.example.net")
    assert not policy.host_allowed(EVIL)


@pytest.mark.parametrize("name", ["https://kith.example.org", "kith.example.org:443", "kith.example.org/x", "*",
                                  "", "evil example", "::1]"])
def test_public_names_must_be_bare_host_names(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"server": {"public_names": [name]}}, env={})
    assert "server.public_names" in str(err.value)
