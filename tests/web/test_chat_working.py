"""The chat shows that it is working and can be stopped (docs/web.md, docs/protocol.md#stopping-a-reply):
with a slow fake model, "Thinking" shows before the first token, "Using a tool" while a tool runs, and
Stop ends the stream with the partial reply kept and marked, also after a reload; a message is copied
as written (headless Chromium)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolContext
from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import T, browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
LONG = " ".join(f"word{i}" for i in range(400))  # 400 pieces: 8 s at the fake's pace below


class LookupTool:
    """A tool that takes a moment, so the page can be seen waiting for it."""

    __name__ = "lookup_tool"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def lookup(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        await asyncio.wait_for(self.release.wait(), 10)
        self.release.clear()
        return "found it"

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        register(Tool(name="lookup", description="Look something up.", input_schema={"type": "object"},
                      handler=self.lookup, private=False))


async def test_thinking_tool_and_stop_keep_the_partial_reply(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    tool = LookupTool()
    gw = await make_gateway(llm=anthropic_llm, plugins=(tool,))
    fake_anthropic.chunk_delay_s = 0.02
    for size in ("desktop", "phone"):  # the one local owner: the phone continues the same conversation
        chat = await open_chat(browser, gw, size)
        page = chat.page
        await page.wait_for_selector("#stop", state="hidden")
        # Thinking: from sending until the first token (the fake waits 1 s before answering).
        fake_anthropic.enqueue(LONG, delay_s=1.0)
        stopped_before = await page.locator(".msg.bot.stopped").count()
        await chat.send("tell me everything")
        await page.wait_for_selector(".msg.working:has-text('Thinking')")
        assert await page.locator(".msg.bot.streaming").count() == 0
        assert await page.is_visible("#stop")
        await chat.shot("thinking")
        # Stop, once some of the reply is there: the stream ends, what was shown stays, marked.
        await wait_until(page, "(document.querySelector('.msg.bot.streaming')?.textContent || '').length > 40")
        assert await page.locator(".msg.working").count() == 0
        await page.click("#stop")
        stopped = page.locator(".msg.bot.stopped").nth(stopped_before)
        await stopped.wait_for()
        text = await stopped.inner_text()
        assert text.startswith("word0 word1") and text.rstrip().endswith("[stopped]") and "word399" not in text
        await page.wait_for_selector("#stop", state="hidden")
        assert await page.locator(".msg.working, .msg.streaming").count() == 0
        await chat.shot("stopped")
        if size == "desktop":
            # Copy: a click on the message, then Copy: its text as written (the Markdown, mark included).
            await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
            await stopped.click()
            await page.click(".msg-tools button:has-text('Copy')")
            await page.wait_for_selector(".msg-tools button:has-text('Copied')")
            copied = await page.evaluate("navigator.clipboard.readText()")
            assert copied.startswith("word0 word1") and copied.endswith("\n\n*[stopped]*")
            await chat.shot("copy")
            await page.keyboard.press("Escape")
            await page.wait_for_selector(".msg-tools", state="detached")
        # A tool: "Using a tool (lookup)" while it runs, then the answer.
        fake_anthropic.chunk_delay_s = 0.0
        fake_anthropic.enqueue_tool_use("lookup", {}, text="Let me look.")
        fake_anthropic.enqueue("Here it is.")
        # The phone replays the desktop's conversation: only an answer after these counts.
        answered = page.locator(".msg.bot:not(.streaming):has-text('Here it is.')")
        answered_before = await answered.count()
        await chat.send("look it up")
        await page.wait_for_selector(".msg.working:has-text('Using a tool (lookup)')")
        await chat.shot("tool")
        tool.release.set()
        await answered.nth(answered_before).wait_for()
        assert await page.locator(".msg.working").count() == 0
        fake_anthropic.chunk_delay_s = 0.02
        # After a reload the stopped reply is still shown as stopped, from the history.
        await page.reload()
        await page.wait_for_selector("#conn.on")
        await wait_until(page, f"document.querySelectorAll('.msg.bot.stopped').length === {stopped_before + 1}")
        assert not chat.errors, chat.errors
