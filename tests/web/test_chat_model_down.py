"""When the model fails, the chat says so with Retry, and /healthz reports a model that keeps failing
until it answers again (issue 33; headless Chromium at 1280 and 390 px)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from gateway.llm.health import FAILING_AFTER
from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import T, browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]


async def _health(gw: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{gw.port}/healthz") as resp:
        return await resp.json()  # type: ignore[no-any-return]


async def test_a_failing_model_shows_retry_and_healthz_says_so(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    for size in SIZES:
        chat = await open_chat(browser, gw, size, client_id=f"web-model-down-{size}")
        page = chat.page
        for _ in range(FAILING_AFTER):
            fake_anthropic.enqueue(status=500, error_type="api_error")
        await chat.send("are you there?")
        box = page.locator("#log .msg.model-down")
        await box.wait_for()
        assert "The model is not answering." in await box.inner_text()
        assert await page.locator("#log .msg.me").all_inner_texts() == ["are you there?"]
        await chat.shot("model-down")
        health = await _health(gw)
        assert health["model"]["failing"]["main"]["failures"] >= 1
        # Retry sends it again: failing again, it stays one box; then the model answers.
        for _ in range(FAILING_AFTER - 1):
            before = health["model"]["failing"]["main"]["failures"]
            await page.click("#log .msg.model-down .retry")
            await wait_until(page, "document.querySelectorAll('#log .msg.model-down').length === 1"
                             " && !document.body.classList.contains('working')")
            health = await _health(gw)
            assert health["model"]["failing"]["main"]["failures"] == before + 1
        assert health["status"] == "degraded"
        assert any("failed" in p and "'main' model" in p for p in health["degraded"]), health["degraded"]
        fake_anthropic.enqueue("Yes, back again.")
        await page.click("#log .msg.model-down .retry")
        await page.wait_for_selector("#log .msg.bot >> text=Yes, back again.")
        assert not await page.locator("#log .msg.model-down").count()
        assert await page.locator("#log .msg.me").all_inner_texts() == ["are you there?"]
        health = await _health(gw)
        assert health["model"]["failing"] == {} and health["status"] == "ok", health
        # The message is in the history once (the failed attempts were not kept).
        await page.reload()
        await page.wait_for_selector("#log .msg.bot")
        assert await page.locator("#log .msg.me").all_inner_texts() == ["are you there?"]
        assert not [e for e in chat.errors if "500" not in e], chat.errors
