"""In real Chromium: opening a sign-in link (a browser navigation, so ``Sec-Fetch-Mode: navigate``)
signs in and lands on ``/``; scripts cannot read the cookie; a page on another origin of this machine,
which the browser counts as same-site and so sends the cookie along, changes nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.http.signin import mint_link
from gateway.testing import test_config
from tests.browser import shared_browser
from tests.fakes.serve import serve
from tests.signin.rig import Notes, daemon, person, url

pytestmark = pytest.mark.browser
TOKEN = "browser-test-operator-token-0123456789"  # a token: the page's automatic local sign-in stays out


@pytest.fixture
async def chromium() -> AsyncIterator[Any]:
    async for b in shared_browser():
        yield b


def attacker_page(target: str, victim: str) -> str:
    """A page on another port of 127.0.0.1 that tries every request a page can send with the cookie."""
    note = f"{target}/t/users/{victim}/notes"
    return f"""<!doctype html><title>other site</title><script>
    const tries = [
      ["json", {{method: "POST", credentials: "include", headers: {{"Content-Type": "application/json"}},
                 body: JSON.stringify({{text: "json"}})}}],
      ["no-cors text", {{method: "POST", mode: "no-cors", credentials: "include",
                         headers: {{"Content-Type": "text/plain"}}, body: '{{"text": "text"}}'}}],
      ["csrf guess", {{method: "POST", credentials: "include",
                       headers: {{"Content-Type": "application/json", "X-CSRF-Token": "guess"}},
                       body: JSON.stringify({{text: "guess"}})}}],
    ];
    window.results = Promise.all(tries.map(([name, init]) => fetch({json.dumps(note)}, init)
      .then(r => name + ":" + r.status + ":" + r.type).catch(e => name + ":error")));
    window.read = fetch({json.dumps(target + "/t/whoami")}, {{credentials: "include"}})
      .then(r => r.text()).catch(e => "error");
    </script>"""


async def test_a_link_signs_in_in_chromium_and_other_sites_change_nothing(chromium: Any, tmp_path: Path) -> None:
    notes = Notes()
    async with daemon(test_config(tmp_path / "data", server={"port": 0, "token": TOKEN}), notes) as gw:
        alice = await person(gw, "alice")
        link = mint_link(gw, alice, operator=False, issued_by="test").url
        context = await chromium.new_context()
        page = await context.new_page()
        response = await page.goto(link)
        assert response is not None and response.ok
        assert page.url == url(gw, "/")
        cookies = {c["name"]: c for c in await context.cookies()}
        assert cookies["kith_session"]["httpOnly"] is True and cookies["kith_session"]["sameSite"] == "Strict"
        assert "kith_session" not in await page.evaluate("document.cookie")  # HttpOnly: no script sees it
        who = await page.evaluate("fetch('/t/whoami').then(r => r.json())")
        assert who == {"user_id": alice, "operator": False, "via": "cookie"}
        # The page's own request without the CSRF token changes nothing either.
        status = await page.evaluate(f"""fetch('/t/users/{alice}/notes', {{method: 'POST',
            headers: {{'Content-Type': 'application/json'}}, body: JSON.stringify({{text: 'no token'}})}})
            .then(r => r.status)""")
        assert status == 403

        # The link is used up: opening it again in the same browser signs in nobody new.
        again = await page.goto(link)
        assert again is not None and again.status == 410

        other = web.Application()

        async def index(request: web.Request) -> web.Response:
            return web.Response(text=attacker_page(url(gw, ""), alice), content_type="text/html")

        other.router.add_get("/", index)
        runner, port = await serve(other)
        try:
            evil = await context.new_page()
            await evil.goto(f"http://127.0.0.1:{port}/")
            results = await asyncio.wait_for(evil.evaluate("window.results"), 20)
            read = await asyncio.wait_for(evil.evaluate("window.read"), 20)
        finally:
            await runner.cleanup()
        assert all(":error" in r or ":0:opaque" in r for r in results), results  # no answer reaches the page
        assert read == "error"  # nothing readable: no CORS, and the daemon refused the foreign Origin
        assert notes.written == []
        await context.close()
