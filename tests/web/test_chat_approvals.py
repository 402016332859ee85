"""An approval request in the web chat (docs/tools.md#approvals), as a person sees it: the host's card
with Approve and Deny, nothing sent before a press, the tool run after Approve, both buttons disabled
once one is pressed; Deny on a second request sends nothing (headless Chromium, 1280 and 390 px)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.tools.outbox import Outbox
from tests.web.chat_support import T, browser, open_chat  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser


async def test_an_approval_card_runs_the_tool_only_when_approved(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    outbox = Outbox()
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, plugins=(outbox,))
    for n, size in enumerate(("desktop", "phone")):
        chat = await open_chat(browser, gw, size)
        page = chat.page
        cards_before = await page.locator(".msg.approval").count()
        fake_anthropic.enqueue_tool_use("send_note", {"to": "bob", "text": f"lunch {n}?"})
        fake_anthropic.enqueue("Waiting for your approval.")
        await chat.send(f"send bob a note about lunch {n}")
        card = page.locator(".msg.approval").nth(cards_before)
        await card.wait_for(timeout=T)
        assert f"Send 'lunch {n}?' to bob." in await card.inner_text()
        approve, deny = card.locator("button:has-text('Approve')"), card.locator("button:has-text('Deny')")
        assert await approve.is_visible() and await deny.is_visible()
        assert outbox.sent == [("bob", f"lunch {i}?") for i in range(n)]  # nothing before the press
        await chat.shot("approval-card")
        done = page.locator(".msg:has-text('sent to bob')")
        done_before = await done.count()
        await approve.click()
        await done.nth(done_before).wait_for(timeout=T)
        assert outbox.sent[-1] == ("bob", f"lunch {n}?")
        assert await approve.is_disabled() and await deny.is_disabled()
        await chat.shot("approval-approved")
        # A second request, denied: nothing goes out.
        fake_anthropic.enqueue_tool_use("send_note", {"to": "eve", "text": "secret"})
        fake_anthropic.enqueue("Waiting again.")
        await chat.send("send eve the secret")
        second = page.locator(".msg.approval").nth(cards_before + 1)
        await second.wait_for(timeout=T)
        before = await page.locator(".msg").count()
        await second.locator("button:has-text('Deny')").click()
        await page.wait_for_function(f"() => document.querySelectorAll('.msg').length > {before}", timeout=T)
        assert ("eve", "secret") not in outbox.sent
        assert await second.locator("button:has-text('Approve')").is_disabled()
        assert chat.errors == []
        await page.context.close()
