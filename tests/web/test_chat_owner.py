"""One local owner in the browser (docs/web.md#one-owner): two fresh browsers on loopback, a phone and a
desktop, are the same person, and the You panel says so (headless Chromium)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.identity.owner import OWNER_ACCOUNT, OWNER_CHANNEL
from tests.web.chat_support import browser, open_chat  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser


async def test_two_fresh_browsers_on_loopback_are_the_one_owner(browser: Any, make_gateway: Any,  # noqa: F811
                                                                 ) -> None:  # fmt: skip
    gw = await make_gateway()
    users = []
    for size in ("desktop", "phone"):  # a fresh context each: no cookie, no client id in localStorage
        chat = await open_chat(browser, gw, size)
        await chat.page.click("#person-btn")
        await chat.page.wait_for_selector("#person[open]")
        users.append(await chat.page.inner_text("#p-user"))
        assert "this computer" in await chat.page.inner_text("#p-accounts")
        await chat.shot("owner-you")
        assert not chat.errors, chat.errors
    assert users[0] == users[1] == gw.identities.lookup(OWNER_CHANNEL, OWNER_ACCOUNT)
    assert len(gw.state.users.all()) == 1
