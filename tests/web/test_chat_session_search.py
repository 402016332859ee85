"""The chat's History searches the messages themselves (seed 000's session search, issue 34): the
messages holding every word as excerpts grouped by day, the words marked, each opening its conversation
read-only (headless Chromium at 1280 and 390 px)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_history_search_shows_marked_excerpts_by_day_and_opens_the_conversation(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],  # noqa: F811
    size: str,
) -> None:
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    fake_anthropic.enqueue("Zebras cross the Mara river with the rains.")
    fake_anthropic.enqueue("Flour, water and <b>patience</b>.")
    chat = await open_chat(browser, gw, size, client_id=f"web-session-search-{size}")
    page = chat.page
    await chat.reply_after("when do the zebras cross the river?")
    await chat.reply_after("/new", notice=True)
    await chat.reply_after("how do I feed a sourdough starter by the river <b>")

    await page.click("#sessions-btn")
    await page.wait_for_selector("#sessions[open] .session-item")
    await page.select_option("#search-mode", "messages")
    await page.fill("#search", "river zebras")
    await page.press("#search", "Enter")
    await wait_until(page, "document.getElementById('sessions-list').dataset.answered === 'messages:river zebras'")
    await chat.shot("history-search")
    # one day, today; the two messages of the zebra conversation, oldest first, the words marked
    assert await page.locator("#sessions-list .day h3").all_text_contents() == ["Today"]  # (shown in capitals)
    texts = [t.strip() for t in await page.locator("#sessions-list .excerpt-item .excerpt-text").all_inner_texts()]
    assert texts == ["when do the zebras cross the river?", "Zebras cross the Mara river with the rains."]
    marks = [m.lower() for m in await page.locator("#sessions-list .excerpt-item mark").all_inner_texts()]
    assert sorted(marks) == ["river", "river", "zebras", "zebras"], marks
    metas = await page.locator("#sessions-list .excerpt-item .meta").all_inner_texts()
    assert "you" in metas[0] and "assistant" in metas[1]
    assert "messages with “river zebras”" in await page.inner_text("#sessions-status")
    assert not await page.locator("#sessions-list .session-item").count()

    # Typed markup stays text: the words of the other conversation are found, its "<b>" shown, not parsed.
    await page.fill("#search", "sourdough <b>")
    await page.press("#search", "Enter")
    await wait_until(page, "document.getElementById('sessions-list').dataset.answered === 'messages:sourdough <b>'")
    assert not await page.locator("#sessions-list .excerpt-text b").count()
    assert "<b>" in await page.locator("#sessions-list .excerpt-text").first.inner_text()

    # An excerpt opens its conversation read-only, in place of the live chat.
    await page.fill("#search", "zebras")
    await page.press("#search", "Enter")
    await wait_until(page, "document.getElementById('sessions-list').dataset.answered === 'messages:zebras'")
    await page.locator("#sessions-list .excerpt-item").last.click()
    await page.wait_for_selector("#archive .msg.bot")
    assert await page.is_hidden("#composer") and await page.is_hidden("#log")
    archive = [t.strip() for t in await page.locator("#archive .msg").all_inner_texts()]
    assert archive[0] == "when do the zebras cross the river?" and "Mara river" in archive[1]
    assert not any("sourdough" in t for t in archive)
    await chat.shot("history-search-opened")

    # Nothing matches: said so.
    await page.click("#sessions-btn")
    await page.fill("#search", "giraffe")
    await page.press("#search", "Enter")
    await wait_until(page, "document.getElementById('sessions-list').dataset.answered === 'messages:giraffe'")
    assert await page.inner_text("#sessions-status") == "No message holds all of those words."
    assert not await page.locator("#sessions-list .excerpt-item").count()
    assert not chat.errors, chat.errors
