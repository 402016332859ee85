"""A person signed in as A reaches only A: every URL of B's (the person API's routes when they are
mounted, and a route guarded by ``require_user``) answers 404, exactly what a user id that does not
exist gets, so A cannot even learn that B exists. The operator reaches both."""

from __future__ import annotations

from pathlib import Path

from gateway.testing import message, test_config
from tests.security.guarded_daemon import operator_auth
from tests.signin.rig import Notes, browser, daemon, person, person_api_urls, sign_in, url

# Valid bodies (by the route's last word), so what is tested is who may ask, not what they send.
BODIES = {"settings": {"display_name": "Mallory"}, "forget": {"text": "passport"}, "rollback": {},
          "notes": {"text": "written by someone else"}}
FILE_EDIT = {"text": "written by someone else", "etag": ""}


def body(method: str, path: str) -> dict[str, str] | None:
    if method == "GET":
        return None
    last = path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
    return FILE_EDIT if "/memory/files/" in path else BODIES.get(last, {})


QUERY = "?q=passport&k=1&limit=1&mode=text"  # valid input, so what is tested is who may ask


async def test_a_signed_in_person_gets_404_for_every_url_of_another(tmp_path: Path) -> None:
    notes = Notes()
    async with daemon(test_config(tmp_path / "data"), notes) as gw:
        alice, bob = await person(gw, "alice"), await person(gw, "bob")
        b_urls = person_api_urls(gw, bob)
        assert ("POST", f"/t/users/{bob}/notes") in b_urls
        async with browser() as http:
            csrf = await sign_in(gw, http, alice)
            for method, path in b_urls:
                path += QUERY
                async with http.request(method, url(gw, path), json=body(method, path),
                                        headers={"X-CSRF-Token": csrf}) as resp:
                    # 404; 403 only on an operator-only route, which refuses every person alike
                    assert resp.status in (403, 404), (method, path, resp.status)
                    status, text = resp.status, await resp.text()
                assert bob not in text  # the answer says nothing about B
                # ... exactly what a user that does not exist gets.
                ghost = path.replace(bob, "u000000000000")
                async with http.request(method, url(gw, ghost), json=body(method, ghost),
                                        headers={"X-CSRF-Token": csrf}) as resp:
                    assert (resp.status, await resp.text()) == (status, text.replace(bob, "u000000000000")), ghost
            # Bad input changes nothing: whose data is judged first, so no 400 hints that B exists.
            for method, path in b_urls:
                async with http.request(method, url(gw, path + "?k=oops&limit=-1"), json={"junk": [1]},
                                        headers={"X-CSRF-Token": csrf}) as resp:
                    assert resp.status in (403, 404), (method, path, resp.status)
            # Their own data is theirs.
            async with http.get(url(gw, f"/t/users/{alice}/notes")) as resp:
                assert resp.status == 200
            if any(p.startswith("/api/users/") for _, p in b_urls):
                async with http.get(url(gw, "/api/users/me/settings")) as resp:
                    assert resp.status == 200
        assert notes.written == []
        # The operator (token) reaches B's notes.
        async with browser() as cli, cli.get(url(gw, f"/t/users/{bob}/notes"), headers=operator_auth(gw)) as resp:
            assert resp.status == 200


async def test_nobody_gets_401_and_operator_routes_need_the_role(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice, bob = await person(gw, "alice"), await person(gw, "bob")
        async with browser() as http:
            for method, path in person_api_urls(gw, bob):
                async with http.request(method, url(gw, path), json=body(method, path)) as resp:
                    assert resp.status in (401, 415), (method, path, resp.status)
            await sign_in(gw, http, alice)
            # One operator check for every operator route, those the CLI calls included: a person
            # without the role is refused (403), whatever their cookie.
            operator_only = [r for r in gw.http_app.router.routes()
                             if r.method == "GET" and r.resource is not None
                             and r.resource.canonical in ("/api/users", "/api/pairing", "/api/memory/stats",
                                                          "/api/distill")]  # fmt: skip
            assert len(operator_only) == 4
            for route in operator_only:
                assert route.resource is not None
                async with http.get(url(gw, route.resource.canonical)) as resp:
                    assert resp.status == 403, route.resource.canonical


async def test_a_bearer_token_is_judged_alone_never_falling_back_to_the_cookie(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        async with browser() as http:
            await sign_in(gw, http, alice)
            async with http.get(url(gw, "/t/whoami"), headers={"Authorization": "Bearer not-the-token-123456"}) as r:
                assert r.status == 401
            async with http.get(url(gw, "/t/whoami"), headers=operator_auth(gw)) as r:
                assert await r.json() == {"user_id": None, "operator": True, "via": "operator-token"}


async def test_another_persons_objects_are_404_under_ones_own_user_id(tmp_path: Path) -> None:
    """B's session, turn and fact, asked for under A's own (authorised) URL, are as absent as made-up ids."""
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        reply = await gw.handle_inbound(message("my locker code is 4711", account="bob"))
        assert reply is not None and reply.turn_id and reply.session_id
        bob = gw.identities.lookup("websocket", "bob")
        assert bob is not None and gw.kg is not None
        fact_id = gw.kg.add(bob, "Bob", "locker code", "4711").fact.id
        objects = [("GET", f"/sessions/{reply.session_id}/messages"), ("GET", f"/turns/{reply.turn_id}/context"),
                   ("DELETE", f"/facts/{fact_id}")]
        async with browser() as http:
            csrf = await sign_in(gw, http, alice)
            for method, tail in objects:
                for uid in ("me", alice):
                    async with http.request(method, url(gw, f"/api/users/{uid}{tail}"),
                                            json={} if method != "GET" else None,
                                            headers={"X-CSRF-Token": csrf}) as resp:
                        text = await resp.text()
                        assert resp.status == 404, (method, uid, tail, resp.status, text)
                    assert "4711" not in text
        assert [f.object for f in gw.state.knowledge.all(bob)] == ["4711"]  # B's fact is still there
