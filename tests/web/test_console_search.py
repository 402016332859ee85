"""The console's recall filters (seed 004: topic, entity, date, as ``/api`` recall has them) and the
Turns view's session search (seed 000: excerpts grouped by date with the words highlighted), driven
in a real browser against a real gateway, at phone (390 px, dark) and desktop (1280 px, light) size."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.console_support import browser, goto_view, open_console, seed, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_recall_filters_narrow_the_hits_and_turns_search_shows_highlighted_excerpts(
    size: str, browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    s = await seed(gw, fake_anthropic)
    store = gw.memory.stores.for_user(s.user_id)
    store.write("memories/2024-05-01.md", "# M\n\n## Night\nTopics: moving\nEntities: Hanna\n\n"
                "- Hanna helps with the flat in Munich.\n", source="test")
    store.write("memories/2024-05-03.md", "# M\n\n## Night\nTopics: cooking\nEntities: Sam\n\n"
                "- Dinner with Sam, Munich style.\n", source="test")
    await gw.settle()
    page = await open_console(browser, gw, size)

    # Recall: no filter finds both; each filter keeps only its own memory, and the hit shows its fields.
    await goto_view(page, "#/me/recall/Munich", "Hanna helps with the flat")
    assert "Dinner with Sam" in (await page.text_content("#view") or "")
    await page.fill("input[name=entity]", "Hanna")
    await page.click("form.recall-search button[type=submit]")
    await page.wait_for_function("() => !document.querySelector('#view').textContent.includes('Dinner with Sam')"
                                 " && document.querySelector('#view').textContent.includes('Hanna helps')")
    hit = page.locator("li.hit", has_text="Hanna helps")
    assert await hit.locator(".badge.topic", has_text="moving").count() == 1
    assert await hit.locator(".badge.entity", has_text="hanna").count() == 1
    await shot(page, f"{size}-recall-filtered")

    await page.fill("input[name=entity]", "")
    await page.fill("input[name=since]", "2024-05-02")
    await page.click("form.recall-search button[type=submit]")
    await page.wait_for_function("() => !document.querySelector('#view').textContent.includes('Hanna helps')"
                                 " && document.querySelector('#view').textContent.includes('Dinner with Sam')")
    await page.fill("input[name=since]", "")
    await page.fill("input[name=topic]", "gardening")
    await page.click("form.recall-search button[type=submit]")
    await page.wait_for_function(
        "() => document.querySelector('#view').textContent.includes('Nothing recalled for that with these filters')")

    # Turns: a search shows the messages that hold every word, grouped by day, the words marked.
    await goto_view(page, "#/me/sessions", "turns")
    await page.fill("input[aria-label='Search sessions']", "moored pier")
    await page.press("input[aria-label='Search sessions']", "Enter")
    await page.wait_for_selector("li.excerpt mark", timeout=10_000)
    excerpt = page.locator("li.excerpt", has_text="moored at pier 17")
    assert await excerpt.count() == 1
    marks = [m.lower() for m in await excerpt.locator("mark").all_text_contents()]
    assert marks == ["moored", "pier"]
    assert await page.locator("section.day h3").count() == 1  # one day (in the person's zone)
    assert page.url.endswith("/sessions/moored%20pier")  # the search is in the address, to come back to
    await shot(page, f"{size}-turns-search")
    # An excerpt links to its session.
    await excerpt.locator("a", has_text="session").click()
    await page.wait_for_function("() => document.querySelector('#view').textContent.includes('Note for later')")

    await goto_view(page, "#/me/sessions/zebra%20narwhal", "No message holds all of those words")
    assert page.kith_errors == []
