"""CSRF: a state change authenticated by the session cookie needs ``X-CSRF-Token`` equal to the
session's token; without it, or with a wrong one, or from a foreign Origin, nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.http.principal import csrf_for
from gateway.testing import test_config
from tests.security.guarded_daemon import operator_auth
from tests.signin.rig import Notes, browser, daemon, person, session_cookie, sign_in, url

METHODS = ["POST", "PUT", "PATCH", "DELETE"]


@pytest.mark.parametrize("method", METHODS)
async def test_missing_or_wrong_token_changes_nothing(tmp_path: Path, method: str) -> None:
    notes = Notes()
    async with daemon(test_config(tmp_path / "data"), notes) as gw:
        alice, bob = await person(gw, "alice"), await person(gw, "bob")
        async with browser() as http, browser() as other:
            csrf = await sign_in(gw, http, alice)
            other_csrf = await sign_in(gw, other, bob)
            target = url(gw, f"/t/users/{alice}/notes")
            wrong = [{}, {"X-CSRF-Token": ""}, {"X-CSRF-Token": csrf[:-1]}, {"X-CSRF-Token": other_csrf},
                     {"X-CSRF-Token": "ü" + csrf}, {"X-Csrf": csrf}]
            for headers in wrong:
                async with http.request(method, target, json={"text": "forged"}, headers=headers) as resp:
                    assert resp.status == 403, (headers, resp.status)
                    assert "X-CSRF-Token" in await resp.text()
            assert notes.written == []
            # Logout is a state change too: refused without the token, so the session still works.
            async with http.post(url(gw, "/api/session/logout"), json={}) as resp:
                assert resp.status == 403
            async with http.get(url(gw, "/t/whoami")) as resp:
                assert resp.status == 200
            async with http.request(method, target, json={"text": "mine"}, headers={"X-CSRF-Token": csrf}) as resp:
                assert resp.status == 200
            assert notes.written == [(alice, "mine")]


async def test_every_state_changing_route_checks_the_token(tmp_path: Path) -> None:
    """Whatever routes are mounted (the person API among them), a cookie without the token is refused
    before any handler runs."""
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        routes = sorted({(r.method, r.resource.canonical) for r in gw.http_app.router.routes()
                         if r.resource is not None and r.method in METHODS
                         and r.resource.canonical not in ("/api/session/local",)})  # fmt: skip
        async with browser() as http:
            await sign_in(gw, http, alice)
            for method, path in routes:
                concrete = path.replace("{uid}", alice).replace("{", "").replace("}", "")
                async with http.request(method, url(gw, concrete), json={}) as resp:
                    # 401: the operator API, which takes the token only; everything else: the CSRF refusal
                    assert resp.status in (401, 403), (method, path, resp.status)
                    assert resp.status == 401 or "X-CSRF-Token" in await resp.text()


async def test_a_foreign_origin_is_refused_even_with_cookie_and_token(tmp_path: Path) -> None:
    notes = Notes()
    async with daemon(test_config(tmp_path / "data"), notes) as gw:
        alice = await person(gw, "alice")
        async with browser() as http:
            csrf = await sign_in(gw, http, alice)
            for origin in ("https://evil.example", f"http://127.0.0.1:{(gw.port or 0) + 1}", "null"):
                async with http.post(url(gw, f"/t/users/{alice}/notes"), json={"text": "x"},
                                     headers={"X-CSRF-Token": csrf, "Origin": origin}) as resp:
                    assert resp.status == 403, origin
            # A form post (no JSON) is refused by the guard, token or not.
            async with http.post(url(gw, f"/t/users/{alice}/notes"), data={"text": "x"},
                                 headers={"X-CSRF-Token": csrf}) as resp:
                assert resp.status == 415
            # Our own origin, with the token: fine.
            async with http.post(url(gw, f"/t/users/{alice}/notes"), json={"text": "ok"},
                                 headers={"X-CSRF-Token": csrf, "Origin": f"http://127.0.0.1:{gw.port}"}) as resp:
                assert resp.status == 200
        assert notes.written == [(alice, "ok")]


async def test_the_operator_token_needs_no_csrf_token(tmp_path: Path) -> None:
    notes = Notes()
    async with daemon(test_config(tmp_path / "data"), notes) as gw:
        alice = await person(gw, "alice")
        async with browser() as cli:
            async with cli.post(url(gw, f"/t/users/{alice}/notes"), json={"text": "op"},
                                headers=operator_auth(gw)) as resp:
                assert resp.status == 200
            # A browser holding a cookie and the token: judged by the token alone, so no CSRF token needed.
            await sign_in(gw, cli, alice)
            secret = session_cookie(cli)
            assert secret is not None and csrf_for(secret)
            async with cli.post(url(gw, f"/t/users/{alice}/notes"), json={"text": "op2"},
                                headers=operator_auth(gw)) as resp:
                assert resp.status == 200
        assert notes.written == [(alice, "op"), (alice, "op2")]


async def test_a_stale_cookie_is_nobody_not_a_csrf_error(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        async with browser() as http:
            http.cookie_jar.update_cookies({"kith_session": "stale-value-from-an-old-session"})
            async with http.post(url(gw, f"/t/users/{alice}/notes"), json={"text": "x"}) as resp:
                assert resp.status == 401
