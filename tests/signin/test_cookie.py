"""The ``kith_session`` cookie: its attributes, Secure exactly when the browser came over https, its
sliding expiry, logout, and revocation when the person is merged away."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

from gateway.http.principal import SESSION_COOKIE
from gateway.http.signin import SESSION_IDLE, TOUCH_AFTER, mint_link, secret_hash
from gateway.testing import test_config
from tests.signin.rig import NAVIGATE, browser, daemon, open_link, person, session_cookie, set_cookie, sign_in, url

TOKEN = "operator-token-for-tests-0123456789"


async def test_the_cookie_is_httponly_strict_and_not_secure_on_plain_loopback(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        async with browser() as http:
            resp = await open_link(http, mint_link(gw, alice, operator=False, issued_by="test").url)
            morsel = set_cookie(resp)[SESSION_COOKIE]
            assert morsel["httponly"] is True
            assert morsel["samesite"] == "Strict"
            assert morsel["path"] == "/"
            assert int(morsel["max-age"]) == int(SESSION_IDLE.total_seconds())
            assert not morsel["secure"]  # plain http on loopback: a Secure cookie would never come back
            assert len(morsel.value) >= 40
            # Only a hash of the cookie is stored.
            assert gw.state.web_sessions.get(morsel.value, datetime.now(UTC)) is None
            assert gw.state.web_sessions.get(secret_hash(morsel.value), datetime.now(UTC)) is not None


async def _cookie_over(gw_port: int, link: str, headers: dict[str, str]) -> aiohttp.ClientResponse:
    async with browser() as http:
        path = link.split("/signin", 1)[1]
        return await open_link_with(http, f"http://127.0.0.1:{gw_port}/signin{path}", headers)


async def open_link_with(http: aiohttp.ClientSession, link: str, headers: dict[str, str]) -> aiohttp.ClientResponse:
    async with http.get(link, headers={**NAVIGATE, **headers}, allow_redirects=False) as resp:
        await resp.read()
        return resp


async def test_secure_when_a_trusted_proxy_says_https_or_the_public_url_is_https(tmp_path: Path) -> None:
    cfg = test_config(tmp_path / "data", server={"port": 0, "token": TOKEN, "public_url": "https://kith.example.org"})
    async with daemon(cfg) as gw:
        alice = await person(gw, "alice")

        def link() -> str:
            return mint_link(gw, alice, operator=False, issued_by="test").url

        # A proxy in front (allowed: server.token is set) says the browser used https.
        resp = await _cookie_over(gw.port or 0, link(), {"X-Forwarded-Proto": "https", "Host": "127.0.0.1"})
        assert resp.status == 303 and set_cookie(resp)[SESSION_COOKIE]["secure"] is True
        # The public https name, reached through a proxy that adds nothing.
        resp = await _cookie_over(gw.port or 0, link(), {"Host": "kith.example.org"})
        assert resp.status == 303 and set_cookie(resp)[SESSION_COOKIE]["secure"] is True
        # Plain http on loopback, even here.
        resp = await _cookie_over(gw.port or 0, link(), {})
        assert resp.status == 303 and not set_cookie(resp)[SESSION_COOKIE]["secure"]


async def test_without_a_token_a_forwarded_proto_is_refused_not_believed(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        link = mint_link(gw, alice, operator=False, issued_by="test").url
        resp = await _cookie_over(gw.port or 0, link, {"X-Forwarded-Proto": "https"})
        assert resp.status == 403 and SESSION_COOKIE not in resp.cookies
        async with browser() as http:  # the guard refused before the link was touched: it still works
            assert (await open_link(http, link)).status == 303


async def test_the_session_slides_and_the_cookie_is_renewed(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        async with browser() as http:
            await sign_in(gw, http, alice)
            secret = session_cookie(http)
            assert secret is not None
            key, store = secret_hash(secret), gw.state.web_sessions
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert resp.status == 200 and SESSION_COOKIE not in resp.cookies  # just issued: nothing to renew
            # Last seen a while ago, and close to its end: the next request moves the end and renews the cookie.
            past = datetime.now(UTC) - TOUCH_AFTER - timedelta(seconds=5)
            store.touch(key, at=past, expires_at=datetime.now(UTC) + timedelta(minutes=1))
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert resp.status == 200
                renewed = set_cookie(resp)[SESSION_COOKIE]
            assert renewed.value == secret and int(renewed["max-age"]) == int(SESSION_IDLE.total_seconds())
            session = store.get(key, datetime.now(UTC))
            assert session is not None and session.expires_at > datetime.now(UTC) + SESSION_IDLE - timedelta(minutes=1)
            # Idle past its end: signed out.
            store.touch(key, at=past, expires_at=datetime.now(UTC) - timedelta(seconds=1))
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert resp.status == 401


async def test_logout_ends_the_session_on_the_server(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        async with browser() as http:
            csrf = await sign_in(gw, http, alice)
            secret = session_cookie(http)
            async with http.post(url(gw, "/api/session/logout"), json={}, headers={"X-CSRF-Token": csrf}) as resp:
                assert resp.status == 200
                assert set_cookie(resp)[SESSION_COOKIE].value == ""
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert resp.status == 401
        # A copy of the old cookie (kept by an attacker, a second tab) is worth nothing either.
        async with (aiohttp.ClientSession() as replay,
                    replay.get(url(gw, "/t/whoami"), headers={"Cookie": f"{SESSION_COOKIE}={secret}"}) as resp):
            assert resp.status == 401


async def test_merging_a_person_away_signs_their_browsers_out(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice, alias = await person(gw, "alice"), await person(gw, "alice-on-telegram", channel="telegram")
        async with browser() as kept, browser() as merged:
            await sign_in(gw, kept, alice)
            await sign_in(gw, merged, alias)
            unused = mint_link(gw, alias, operator=False, issued_by="test").url
            gw.identities.merge(into=alice, source=alias)
            async with merged.get(url(gw, "/t/whoami")) as resp:
                assert resp.status == 401
            async with kept.get(url(gw, "/t/whoami")) as resp:
                assert (await resp.json())["user_id"] == alice
            assert (await open_link(merged, unused)).status == 410


async def test_revoking_a_person_signs_every_browser_out(tmp_path: Path) -> None:
    from gateway.http.signin import revoke_user

    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        async with browser() as one, browser() as two:
            await sign_in(gw, one, alice)
            await sign_in(gw, two, alice)
            assert revoke_user(gw, alice) == 2
            for http in (one, two):
                async with http.get(url(gw, "/t/whoami")) as resp:
                    assert resp.status == 401


async def test_signing_in_again_replaces_the_browsers_session(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice, bob = await person(gw, "alice"), await person(gw, "bob")
        async with browser() as http:
            await sign_in(gw, http, alice)
            first = session_cookie(http)
            await sign_in(gw, http, bob)  # a new session, never the old one reused
            second = session_cookie(http)
            assert first and second and first != second
            now = datetime.now(UTC)
            assert gw.state.web_sessions.get(secret_hash(first), now) is None
            assert gw.state.web_sessions.get(secret_hash(second), now) is not None
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert (await resp.json())["user_id"] == bob


async def test_erasing_a_person_signs_their_browsers_out(tmp_path: Path) -> None:
    from gateway.identity.erase import erase_person
    from tests.storage import count_rows

    async with daemon(test_config(tmp_path / "data")) as gw:
        alice, bob = await person(gw, "alice"), await person(gw, "bob")
        async with browser() as gone, browser() as kept:
            await sign_in(gw, gone, alice)
            await sign_in(gw, kept, bob)
            unused = mint_link(gw, alice, operator=False, issued_by="test").url
            await erase_person(gw, alice)
            async with gone.get(url(gw, "/t/whoami")) as resp:
                assert resp.status == 401
            async with kept.get(url(gw, "/t/whoami")) as resp:
                assert (await resp.json())["user_id"] == bob
            assert (await open_link(gone, unused)).status == 410
        for table in ("web_sessions", "web_signin_tokens"):
            assert count_rows(gw.state, f"SELECT COUNT(*) FROM {table} WHERE user_id=?", alice) == 0
