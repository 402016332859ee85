"""Issue 27, low item: a ``HEAD`` request used up a one-time sign-in link (aiohttp answers HEAD with the
GET handler). Link checkers and mail scanners send HEAD, also with browser-like headers; only a GET
redeems a link now."""

from __future__ import annotations

from pathlib import Path

from gateway.http.principal import SESSION_COOKIE
from gateway.http.signin import mint_link
from gateway.testing import test_config
from tests.signin.rig import NAVIGATE, browser, daemon, open_link, person


async def test_a_head_request_leaves_the_link_unused(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        alice = await person(gw, "alice")
        link = mint_link(gw, alice, operator=False, issued_by="test")
        async with browser() as scanner, browser() as person_browser:
            for _ in range(2):
                async with scanner.head(link.url, headers=NAVIGATE, allow_redirects=False) as resp:
                    assert resp.status == 200 and SESSION_COOKIE not in resp.cookies
            opened = await open_link(person_browser, link.url)
            assert opened.status == 303 and SESSION_COOKIE in opened.cookies, "the person's GET still signs in"
