"""The memory console shows every view of a person's memory, at phone and desktop size, from real data.

Everything on screen was written through kith's own code paths (tests/web/console_support.py) and is
read back through the person API; each view is screenshotted (phone in dark mode, desktop in light).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.console_support import CANARY, browser, goto_view, open_console, seed, shot, shots_dir

__all__ = ["browser"]
pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_every_console_view_shows_the_persons_real_memory(
    size: str, browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    # A tight context budget, so the turn view has trimming to show.
    gw = await make_gateway(llm=anthropic_llm, context={"budget_tokens": 520})
    s = await seed(gw, fake_anthropic)
    page = await open_console(browser, gw, size)
    await page.wait_for_selector("#nav a[aria-current=page]", timeout=10_000)
    # Loopback without a token: the local person is signed in (operator role: the picker lists users).
    assert "operator" in (await page.text_content("#me") or "")

    await goto_view(page, "#/me/files", "What kith remembers")
    view = await page.text_content("#view") or ""
    for path in ("USER.md", "PATTERNS.md", "WORKING.md", "people/Sam.md", "topics/sailing.md",
                 f"memories/{s.today}.md", "MEMORY_SHORT.md"):
        assert path in view, path
    assert "expires" in view  # WORKING.md's expiry
    await shot(page, f"{size}-files")

    await goto_view(page, "#/me/file/USER.md", "Prefers tea over coffee")
    # Rendered Markdown, not raw: the heading and the emphasis are elements.
    assert await page.locator("article.doc h2", has_text="Preferences").count() == 1
    assert await page.locator("article.doc em", has_text="long").count() == 1
    assert "Drinks oat milk" in (await page.text_content("#view") or "")  # the curation run's change
    await shot(page, f"{size}-user-md")
    await goto_view(page, "#/me/file/PATTERNS.md", "Writes late in the evening")
    await shot(page, f"{size}-patterns-md")
    await goto_view(page, "#/me/file/WORKING.md", "Drafting the grant application")
    assert await page.locator(".badge", has_text="expires").count() == 1
    await shot(page, f"{size}-working-md")
    await goto_view(page, "#/me/file/people/Sam.md", "Allergic to peanuts")
    await shot(page, f"{size}-people")
    await goto_view(page, "#/me/file/topics/sailing.md", "bowline")
    assert await page.locator("article.doc table td", has_text="Mira").count() == 1
    await shot(page, f"{size}-topics")
    await goto_view(page, f"#/me/file/memories/{s.today}.md", CANARY)
    await shot(page, f"{size}-dated-memory")

    await goto_view(page, "#/me/facts", "Munich")
    munich = page.locator(f"li.fact[data-fact='{s.fact_ids['munich']}']")
    berlin = page.locator(f"li.fact[data-fact='{s.fact_ids['berlin']}']")
    assert "current" in (await munich.get_attribute("class") or "")
    assert "current" not in (await berlin.get_attribute("class") or "")  # ended when she moved
    await shot(page, f"{size}-facts")

    await goto_view(page, "#/me/recall/where is the boat moored", "pier 17")
    assert await page.locator("li.hit").count() >= 1
    await shot(page, f"{size}-recall")

    await goto_view(page, "#/me/review", "Ignore all previous instructions")
    view = await page.text_content("#view") or ""
    assert "Drinks oat milk" in view and "Sam sails on Sundays" not in view
    await shot(page, f"{size}-review")

    await goto_view(page, "#/me/distill", "short")
    assert "pier 17" in (await page.text_content("#view") or "")  # the short digest of the logged turn
    await shot(page, f"{size}-distill")

    await goto_view(page, "#/me/sessions", "turns")
    await shot(page, f"{size}-sessions")
    await goto_view(page, f"#/me/session/{s.session_id}", "pier 17")
    await shot(page, f"{size}-session")
    await page.locator("a.saw").last.click()
    await page.wait_for_selector("table.sections", timeout=10_000)
    view = await page.text_content("#view") or ""
    assert "What the assistant saw" in view and "tokens" in view
    assert await page.locator("table.sections tbody tr").count() >= 4
    assert await page.locator("ul.trims li").count() >= 1  # what did not fit the budget
    await shot(page, f"{size}-turn-context")

    await goto_view(page, "#/me/pairing", "Pairing requests")
    await shot(page, f"{size}-pairing")
    assert page.kith_errors == []
    print(f"console screenshots: {shots_dir()}")
