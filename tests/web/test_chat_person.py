"""The person on the chat page: name, accounts and persona shown; another browser linked through the
/link confirmation flow from the panel; settings saved through the API (headless Chromium)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.http.signin import mint_link
from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import SIZES as CHAT_SIZES
from tests.web.chat_support import T, browser, open_chat, shot, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]


async def test_settings_change_name_and_timezone_and_the_next_prompt_follows(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        chat = await open_chat(browser, gw, size, client_id=f"web-settings-{size}")
        page = chat.page
        await page.click("#settings-btn")
        await page.wait_for_selector("#settings[open]")
        await page.fill("#s-name", "Ada")
        await page.select_option("#s-tz", "Pacific/Kiritimati")
        await page.select_option("#s-tier", "3")
        await chat.shot("settings")
        await page.click("#settings-form button[type=submit]")
        await page.wait_for_selector("#settings-status:has-text('Saved')")
        user_id = gw.identities.lookup("websocket", f"web-settings-{size}")
        assert user_id is not None
        user = gw.state.users.get(user_id)
        assert user is not None
        assert user.display_name == "Ada" and user.timezone == "Pacific/Kiritimati" and user.tier == 3
        await page.keyboard.press("Escape")
        await page.wait_for_selector("#settings:not([open])", state="attached")
        assert await page.inner_text("#person-name") == "Ada"
        # The next prompt's date line is in the new zone.
        fake_anthropic.enqueue("noted")
        await chat.reply_after("what time is it?")
        assert "(Pacific/Kiritimati)" in fake_anthropic.system_text()
        # Reopened after a reload, the panel shows what was saved.
        await page.reload()
        await page.wait_for_selector("#conn.on")
        await page.click("#settings-btn")
        await wait_until(page, "document.getElementById('s-tz').value === 'Pacific/Kiritimati'")
        assert await page.input_value("#s-name") == "Ada"
        assert await page.input_value("#s-tier") == "3"
        assert not chat.errors, chat.errors


async def test_linking_another_browser_from_the_person_panel(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    # two people until the link joins them (not the one local owner)
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    laptop = await open_chat(browser, gw, "desktop", client_id="web-laptop")
    phone = await open_chat(browser, gw, "phone", client_id="web-phone")
    for chat in (laptop, phone):
        await chat.page.click("#person-btn")
        await chat.page.wait_for_selector("#person[open] #p-accounts li")
    assert "web-laptop" in await laptop.page.inner_text("#p-accounts")
    await laptop.shot("person")
    # The laptop shows a code ...
    await laptop.page.click("#link-new")
    await laptop.page.wait_for_selector("#link-out .big-code")
    code = (await laptop.page.inner_text("#link-out .big-code")).strip()
    assert code in await laptop.page.inner_text("#link-out")
    await laptop.shot("link-code")
    # ... the phone enters it and is asked to confirm; so is the laptop, told by the server.
    await phone.page.fill("#link-code", code)
    await phone.page.press("#link-code", "Enter")
    await phone.page.wait_for_selector("#link-actions:not([hidden])")
    await laptop.page.wait_for_selector("#link-actions:not([hidden])")
    await phone.shot("link-confirm")
    await phone.page.click("#link-confirm")
    await wait_until(phone.page, "document.getElementById('link-out').textContent.includes('Confirmed')")
    await laptop.page.click("#link-confirm")
    await wait_until(laptop.page, "document.getElementById('p-accounts').textContent.includes('web-phone')")
    assert "Linked" in await laptop.page.inner_text("#link-out")
    await laptop.shot("linked")
    for chat in (laptop, phone):
        assert not chat.errors, chat.errors


async def test_a_sign_in_link_opens_the_chat_as_that_person_even_on_a_browser_someone_else_used(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],  # noqa: F811
    ws_connect: Any,
) -> None:
    token = "t0ken-for-the-sign-in-link-test-0123456789"
    gw = await make_gateway(llm=anthropic_llm, server={"port": 0, "token": token})
    for client_id, name in (("web-shared", "Alice"), ("web-bob", "Bob")):
        client = await ws_connect(gw, headers={"Authorization": f"Bearer {token}"})
        await client.hello(client_id, name)
    bob = gw.identities.lookup("websocket", "web-bob")
    assert bob is not None
    link = mint_link(gw, bob, operator=False, issued_by="test")
    # This browser was Alice's client before; Bob signs in on it with his link.
    context = await browser.new_context(**CHAT_SIZES["phone"])
    await context.add_init_script("localStorage.getItem('kith.client_id') || "
                                  "localStorage.setItem('kith.client_id', 'web-shared')")
    page = await context.new_page()
    await page.goto(link.url)
    await page.wait_for_selector("#conn.on")
    await wait_until(page, "document.getElementById('person-name').textContent === 'Bob'")
    assert await page.is_hidden("#auth")
    fake_anthropic.enqueue("hi Bob")
    await page.fill("#input", "hello, it is Bob")
    await page.press("#input", "Enter")
    await page.wait_for_selector(".msg.bot:not(.streaming)")
    new_id = await page.evaluate("localStorage.getItem('kith.client_id')")
    assert new_id != "web-shared" and gw.identities.lookup("websocket", new_id) == bob
    assert gw.identities.lookup("websocket", "web-shared") != bob  # Alice's account was not taken over
    await shot(page, "signed-in-by-link", "phone")
