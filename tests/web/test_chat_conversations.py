"""A past conversation is renamed, exported, continued and deleted from the chat's History, and is then
gone from its search (issue 33's acceptance; headless Chromium at 1280 and 390 px)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import T, browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]


def _saver(path: Path, names: list[str]) -> Any:
    """A download handler (it runs on the browser's loop, tests/browser.py): the file saved to ``path``."""
    saving: list[Any] = []

    def on_download(download: Any) -> None:
        names.append(download.suggested_filename)
        saving.append(asyncio.ensure_future(download.save_as(str(path))))

    return on_download


async def _saved(path: Path, last: str) -> str:
    """The downloaded file once it holds ``last`` (polled: the browser writes it on its own time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + T / 1000
    while True:
        text = await asyncio.to_thread(lambda: path.read_text() if path.is_file() else "")
        if last in text:
            return text
        assert loop.time() < deadline, f"no download with {last!r} at {path}"
        await asyncio.sleep(0.05)


async def _held_back(route: Any) -> None:
    await asyncio.sleep(0.5)
    await route.continue_()


async def _open_past(page: Any, title: str) -> None:
    await page.click("#sessions-btn")
    await page.wait_for_selector("#sessions[open] .session-item")
    await page.locator("#sessions .session-item", has_text=title).click()
    await page.wait_for_selector("#archive .msg.bot")


async def test_a_past_conversation_is_continued_renamed_exported_and_deleted(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    # each size is a person of its own, from an empty conversation
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    for size in SIZES:
        for answer in ("Fjords are deep.", "Feed it flour and water.", "Red kayaks are easy to see."):
            fake_anthropic.enqueue(answer)
        chat = await open_chat(browser, gw, size, client_id=f"web-conversations-{size}")
        page = chat.page
        await chat.reply_after("we paddled the kayak across the fjord")
        await chat.reply_after("/new", notice=True)
        await chat.reply_after("my sourdough starter needs feeding")

        # Rename: the title shows in the bar and in the list.
        await _open_past(page, "we paddled the kayak")
        assert await page.is_visible("#archive-continue")  # not the current conversation
        await chat.shot("archive-actions")
        await page.click("#archive-rename")
        await page.fill("#rename-input", "Fjord trip")
        await chat.shot("rename")
        await page.press("#rename-input", "Enter")
        await wait_until(page, "document.getElementById('archive-title').textContent === 'Fjord trip'")
        assert await page.is_hidden("#rename-form")

        # Export: a Markdown file with the title and the messages.
        saved = tmp_path / f"{size}.md"
        names: list[str] = []
        page.on("download", _saver(saved, names))
        await page.click("#archive-export")
        await page.wait_for_selector("#archive-status >> text=Exported")
        text = await _saved(saved, "Fjords are deep.")
        assert names and names[0].startswith("kith-") and names[0].endswith(".md")
        assert text.startswith("# Fjord trip\n") and "we paddled the kayak across the fjord" in text
        assert "Fjords are deep." in text and "sourdough" not in text

        # Continue: the chat shows that conversation again, and the next message goes into it.
        await page.click("#archive-continue")
        await page.wait_for_selector("#composer:not([hidden])")
        await wait_until(page, "document.getElementById('log').textContent.includes('we paddled the kayak')")
        assert "sourdough" not in await page.locator("#log").inner_text()
        await chat.reply_after("and the kayak was red")
        await chat.shot("continued")
        await page.click("#sessions-btn")
        await page.wait_for_selector("#sessions[open] .session-item")
        current = page.locator("#sessions .session-item", has_text="Fjord trip")
        assert "current" in await current.inner_text() and "2 turns" in await current.inner_text()
        await chat.shot("sessions-renamed")
        await page.keyboard.press("Escape")

        # Delete: asked first; "Keep it" keeps it, "Delete" deletes it; then no search finds it.
        await _open_past(page, "my sourdough")
        await page.click("#archive-delete")
        await page.wait_for_selector("#delete-confirm[open]")
        await chat.shot("delete-confirm")
        await page.click("#delete-confirm button[value=keep]")
        assert await page.is_visible("#archive-bar")
        await page.keyboard.press("Escape")
        await _open_past(page, "Fjord trip")
        assert await page.is_hidden("#archive-continue")  # the current one
        await page.click("#archive-delete")
        await page.click("#delete-confirm button[value=delete]")
        await page.wait_for_selector("#log .msg.notice >> text=Deleted the conversation")
        await chat.shot("deleted")
        # The list is fetched again on opening; held back here for 0.5 s, that answer comes last, and
        # the list that was drawn before the delete must not be shown meanwhile (it was: the deleted
        # conversation reappeared until the answer came, and a test reading the list then failed).
        await page.route("**/sessions?*", _held_back)
        await page.click("#sessions-btn")
        await page.wait_for_selector("#sessions[open] .session-item")
        assert await page.locator("#sessions .session-item").all_inner_texts() == [
            t for t in await page.locator("#sessions .session-item").all_inner_texts() if "sourdough" in t]
        await chat.shot("history-after-delete")
        await page.unroute("**/sessions?*", _held_back)
        for mode in ("text", "semantic", "messages"):
            await page.select_option("#search-mode", mode)
            await page.fill("#search", "kayak fjord")
            await page.press("#search", "Enter")
            # the search's own answer, drawn (the list from before the search must not pass for it)
            answered = f"'{mode}:kayak fjord'"
            await wait_until(page, f"document.getElementById('sessions-list').dataset.answered === {answered}")
            assert "fjord" not in (await page.locator("#sessions-list").inner_text()).lower()
        await page.keyboard.press("Escape")
        # The deleted conversation was the current one: the chat starts afresh.
        await wait_until(page, "!document.getElementById('log').textContent.includes('kayak')"
                         " || document.querySelectorAll('#log .msg.me').length === 0")
        assert not chat.errors, chat.errors
