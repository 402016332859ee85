"""The chat page by keyboard alone: focus order, Enter sends, Shift+Enter is a newline, Escape closes
panels and gives focus back (headless Chromium)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import browser, open_chat  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]


async def focused(page: Any) -> str:
    return await page.evaluate("document.activeElement.id || document.activeElement.tagName")  # type: ignore[no-any-return]


async def test_keyboard_only(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        chat = await open_chat(browser, gw, size, client_id=f"web-keyboard_only-{size}")
        page = chat.page
        # Tab order: the person, History, Settings, the memory console, then the message box.
        await page.evaluate("document.activeElement.blur()")
        order = []
        for _ in range(6):
            await page.keyboard.press("Tab")
            order.append(await focused(page))
        assert order[:4] == ["person-btn", "sessions-btn", "settings-btn", "memory-link"]
        assert "input" in order
        # Shift+Enter is a newline, Enter sends.
        await page.focus("#input")
        await page.keyboard.type("line one")
        await page.keyboard.press("Shift+Enter")
        await page.keyboard.type("line two")
        assert await page.input_value("#input") == "line one\nline two"
        fake_anthropic.enqueue("two lines received")
        await page.keyboard.press("Enter")
        await page.wait_for_selector(".msg.bot:not(.streaming)")
        assert await page.inner_text(".msg.me") == "line one\nline two"
        assert await page.input_value("#input") == ""
        # A panel opens from the keyboard, Escape closes it and focus goes back to its button.
        await page.focus("#settings-btn")
        await page.keyboard.press("Enter")
        await page.wait_for_selector("#settings[open]")
        assert await page.evaluate("document.getElementById('settings').contains(document.activeElement)")
        await page.keyboard.press("Escape")
        await page.wait_for_selector("#settings:not([open])", state="attached")
        assert await focused(page) == "settings-btn"
        # The sessions panel: type a search, Enter searches, Escape closes.
        await page.focus("#sessions-btn")
        await page.keyboard.press("Enter")
        await page.wait_for_selector("#sessions[open]")
        assert await focused(page) == "search"
        await page.keyboard.press("Escape")
        await page.wait_for_selector("#sessions:not([open])", state="attached")
        await chat.shot("keyboard")
        assert not chat.errors, chat.errors
