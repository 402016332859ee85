"""Acceptance 3: the web chat page in headless Chromium: load, send, see the streamed reply."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import browser  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser




async def test_web_chat_streams_a_reply(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    fake_anthropic.chunk_delay_s = 0.05
    long_reply = "Hello from kith! " + "This reply arrives piece by piece. " * 4
    fake_anthropic.enqueue(long_reply.strip())
    page = await browser.new_page(viewport={"width": 390, "height": 760})  # a phone-sized screen
    await page.goto(f"http://127.0.0.1:{gw.port}/")
    await page.wait_for_selector("#conn.on", timeout=10_000)
    await page.fill("#input", "hi there")
    await page.press("#input", "Enter")
    await page.wait_for_selector(".msg.me", timeout=5_000)
    # While streaming, the bubble is marked and holds a prefix of the reply.
    streaming = await page.wait_for_selector(".msg.bot.streaming", timeout=10_000)
    # The bubble is rendered Markdown (a paragraph); its text is the part streamed so far.
    partial = (await streaming.inner_text()).strip()
    assert long_reply.startswith(partial) and len(partial) < len(long_reply.strip())
    await page.wait_for_selector(".msg.bot:not(.streaming)", timeout=10_000)
    final = await page.inner_text(".msg.bot")
    assert final.strip() == long_reply.strip()
    assert "hi there" in fake_anthropic.requests[-1]["messages"][-1]["content"]
    # Session shown; Off-The-Record indicator hidden until /otr on.
    assert (await page.text_content("#session") or "").startswith("session ")
    assert await page.is_hidden("#otr")
    await page.fill("#input", "/otr on")
    await page.press("#input", "Enter")
    await page.wait_for_selector("#otr:not([hidden])", timeout=5_000)
    assert await page.evaluate("document.body.classList.contains('otr')")
