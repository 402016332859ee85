"""One-time sign-in links: single use, 15 minutes, only a browser navigation redeems them, and the
operator route that mints them for ``kith users login-link``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.http.principal import SESSION_COOKIE
from gateway.http.signin import LINK_TTL, mint_link, secret_hash
from gateway.testing import test_config
from tests.security.guarded_daemon import operator_auth
from tests.signin.rig import NAVIGATE, browser, daemon, open_link, person, sign_in, url


async def test_a_link_signs_in_once_and_redirects_home(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        link = mint_link(gw, alice, operator=False, issued_by="test")
        assert link.expires_at - datetime.now(UTC) <= LINK_TTL
        async with browser() as first, browser() as second:
            resp = await open_link(first, link.url)
            assert resp.status == 303 and resp.headers["Location"] == "/"
            assert resp.headers["Cache-Control"] == "no-store" and resp.headers["Referrer-Policy"] == "no-referrer"
            async with first.get(url(gw, "/t/whoami")) as who:
                assert await who.json() == {"user_id": alice, "operator": False, "via": "cookie"}
            # The same link again, from the same browser or another one: used up.
            for http in (first, second):
                again = await open_link(http, link.url)
                assert again.status == 410
                assert SESSION_COOKIE not in again.cookies
            async with second.get(url(gw, "/t/whoami")) as who:
                assert who.status == 401


async def test_two_racing_requests_with_one_link_give_one_session(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        link = mint_link(gw, alice, operator=False, issued_by="test")
        clients = [browser() for _ in range(6)]
        try:
            answers = await asyncio.gather(*(open_link(c, link.url) for c in clients))
        finally:
            for c in clients:
                await c.close()
        assert sorted(a.status for a in answers) == [303] + [410] * 5


async def test_an_expired_or_unknown_link_signs_nobody_in(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        now = datetime.now(UTC)
        # A link issued 16 minutes ago (its row as mint_link writes it, with the clock moved back).
        gw.state.web_sessions.add_signin(secret_hash("old-token-0123456789"), user_id=alice, operator=True,
                                         issued_by="test", at=now - timedelta(minutes=16),
                                         expires_at=now - timedelta(minutes=1))  # fmt: skip
        async with browser() as http:
            for token in ("old-token-0123456789", "never-issued-0123456789", "", "x" * 500):
                resp = await open_link(http, url(gw, f"/signin?t={token}"))
                assert resp.status == 410, token
                assert SESSION_COOKIE not in resp.cookies
            async with http.get(url(gw, "/signin"), headers=NAVIGATE, allow_redirects=False) as resp:
                assert resp.status == 410
        # The expired row is gone (taken and found stale), not left to be tried again.
        assert gw.state.web_sessions.take_signin(secret_hash("old-token-0123456789"), now) is None


async def test_a_link_preview_does_not_use_up_the_link(tmp_path: Path) -> None:
    """Chat platforms fetch every link in a message to show a preview; that fetch is no navigation."""
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        link = mint_link(gw, alice, operator=False, issued_by="test")
        async with browser() as bot:
            for headers in ({}, {"User-Agent": "TelegramBot (like TwitterBot)"}, {"Sec-Fetch-Mode": "no-cors"}):
                async with bot.get(link.url, headers=headers, allow_redirects=False) as resp:
                    assert resp.status == 200 and SESSION_COOKIE not in resp.cookies
                    assert "Open this sign-in link in your web browser" in await resp.text()
        async with browser() as person_browser:
            assert (await open_link(person_browser, link.url)).status == 303


async def test_an_operator_link_gives_the_operator_role(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice, bob = await person(gw, "alice"), await person(gw, "bob")
        async with browser() as http:
            await sign_in(gw, http, alice, operator=True)
            async with http.get(url(gw, "/t/whoami")) as who:
                assert await who.json() == {"user_id": alice, "operator": True, "via": "cookie"}
            async with http.get(url(gw, f"/t/users/{bob}/notes")) as resp:
                assert resp.status == 200  # the operator sees every user


async def test_the_link_route_is_for_the_operator_only(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        async with browser() as http:
            async with http.post(url(gw, "/api/session/links"), json={"user": alice}) as resp:
                assert resp.status == 401
            csrf = await sign_in(gw, http, alice)
            async with http.post(url(gw, "/api/session/links"), json={"user": alice, "operator": True},
                                 headers={"X-CSRF-Token": csrf}) as resp:
                assert resp.status == 403  # a person cannot mint themselves the operator role
            async with http.post(url(gw, "/api/session/links"), json={"user": alice},
                                 headers={"Authorization": "Bearer wrong-token-wrong-token"}) as resp:
                assert resp.status == 401
        async with browser() as cli:
            auth = operator_auth(gw)
            async with cli.post(url(gw, "/api/session/links"), json={"user": "u-nobody"}, headers=auth) as resp:
                assert resp.status == 404
            async with cli.post(url(gw, "/api/session/links"), json={"user": alice, "operator": "yes"},
                                headers=auth) as resp:
                assert resp.status == 400
            async with cli.post(url(gw, "/api/session/links"), json={"user": alice, "operator": True},
                                headers=auth) as resp:
                assert resp.status == 200
                body = await resp.json()
            assert body["user"] == alice and body["operator"] is True
            assert body["url"].startswith(f"http://127.0.0.1:{gw.port}/signin?t=")
        async with browser() as http:
            assert (await open_link(http, body["url"])).status == 303
            async with http.get(url(gw, "/t/whoami")) as who:
                assert (await who.json())["operator"] is True


async def test_links_use_the_public_url_when_one_is_configured(tmp_path: Path) -> None:
    cfg = test_config(tmp_path / "data", server={"port": 0, "token": "t" * 32,
                                                 "public_url": "https://kith.example.org/"})
    async with daemon(cfg) as gw:
        alice = await person(gw, "alice")
        link = mint_link(gw, alice, operator=False, issued_by="test")
        assert link.url.startswith("https://kith.example.org/signin?t=")
        assert "kith.example.org" in gw.config.server.public_names


def test_the_link_address_follows_the_configuration(tmp_path: Path) -> None:
    from gateway.http.signin import base_url

    def for_server(**server: object) -> str:
        return base_url(test_config(tmp_path / "data", server={"port": 18765, **server}).server, None)

    token = {"token": "t" * 32}
    assert for_server() == "http://127.0.0.1:18765"
    assert for_server(host="192.168.1.5", **token) == "http://192.168.1.5:18765"
    assert for_server(host="::", **token) == "http://127.0.0.1:18765"
    assert for_server(host="fd00::5", **token) == "http://[fd00::5]:18765"
    assert for_server(host="0.0.0.0", public_names=["kith.lan"], **token) == "http://kith.lan:18765"
    assert for_server(public_url="https://kith.example.org:8443/", **token) == "https://kith.example.org:8443"
