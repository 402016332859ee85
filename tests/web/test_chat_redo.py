"""Regenerate the last reply and edit the last message from the chat page (docs/web.md,
docs/protocol.md#regenerate-and-edit): the model answers without the exchange being redone, the page
marks the new attempt and dims the old one, and after a reload the history keeps every attempt
(headless Chromium)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser


async def test_regenerate_and_edit_the_last_exchange(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    for size in ("desktop", "phone"):  # the one local owner: the phone continues the same conversation
        chat = await open_chat(browser, gw, size)
        page = chat.page
        fake_anthropic.enqueue(f"First answer ({size}).")
        first = await chat.reply_after("what is kith?")
        # The tools of the last reply: Copy and Regenerate (Edit belongs to the message).
        await first.click()
        await page.wait_for_selector(".msg-tools button:has-text('Regenerate')")
        assert not await page.is_visible(".msg-tools button:has-text('Edit')")
        await chat.shot("reply-tools")
        fake_anthropic.enqueue(f"Second answer ({size}).")
        await page.click(".msg-tools button:has-text('Regenerate')")
        await page.wait_for_selector(f".msg.bot:not(.streaming):has-text('Second answer ({size}).')")
        assert f"First answer ({size})" not in str(fake_anthropic.last_turn()["messages"])
        assert await page.locator(f".msg.bot.superseded:has-text('First answer ({size}).')").count() == 1
        assert await page.locator(".msg.me.redo").last.get_attribute("data-redo") == "Regenerated"
        # Edit the last message: it goes back into the box; sending it redoes that exchange.
        await page.locator(".msg.me").last.click()
        await page.click(".msg-tools button:has-text('Edit')")
        assert await page.input_value("#input") == "what is kith?"
        assert await page.is_visible("#editing")
        await page.fill("#input", "what is kith, briefly?")
        await chat.shot("editing")
        fake_anthropic.enqueue(f"Edited answer ({size}).")
        await page.press("#input", "Enter")
        await page.wait_for_selector(f".msg.bot:not(.streaming):has-text('Edited answer ({size}).')")
        assert f"Second answer ({size})" not in str(fake_anthropic.last_turn()["messages"])
        assert not await page.is_visible("#editing")
        assert await page.locator(".msg.me.redo").last.get_attribute("data-redo") == "Edited"
        await chat.shot("edited")
        # Nothing was rewritten: after a reload the history holds every attempt, in order.
        await page.reload()
        await page.wait_for_selector("#conn.on")
        await wait_until(page, f"[...document.querySelectorAll('.msg.bot')].some((b) => "
                               f"b.textContent.includes('Edited answer ({size}).'))")
        said = [t.strip() for t in await page.locator(".msg.me, .msg.bot").all_inner_texts()][-6:]
        assert said == ["what is kith?", f"First answer ({size}).", "what is kith?", f"Second answer ({size}).",
                        "what is kith, briefly?", f"Edited answer ({size})."]
        assert not chat.errors, chat.errors
