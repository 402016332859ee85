"""The console with the keyboard only: tabs, search, forget, delete; and the operator's person picker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.console_support import CANARY, browser, goto_view, open_console, seed, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser


async def tab_to(page: Any, selector: str, limit: int = 80) -> None:
    """Press Tab until the focused element matches ``selector`` (as a keyboard user would)."""
    for _ in range(limit):
        await page.keyboard.press("Tab")
        if await page.evaluate("s => document.activeElement && document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


async def test_everything_is_reachable_with_the_keyboard(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    s = await seed(gw, fake_anthropic)
    page = await open_console(browser, gw, "desktop")
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await goto_view(page, "#/me/files", "What kith remembers")

    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.className") == "skip"  # the skip link comes first
    await tab_to(page, "#nav a[href$='/facts']")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("li.fact", timeout=10_000)
    # Focus moved to the new view's heading, so the next Tab continues inside the view.
    assert await page.evaluate("document.activeElement.tagName") == "H2"
    await tab_to(page, f"li.fact[data-fact='{s.fact_ids['berlin']}'] button")
    await page.keyboard.press("Enter")
    await page.wait_for_selector(f"li.fact[data-fact='{s.fact_ids['berlin']}']", state="detached", timeout=10_000)
    assert gw.kg.get(s.fact_ids["berlin"]) is None

    await tab_to(page, "#nav a[href$='/recall']")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("form.search input", timeout=10_000)
    await tab_to(page, "form.search input")
    await page.keyboard.type("locker code canary")
    await page.keyboard.press("Enter")
    await page.wait_for_selector(f"li.hit >> text={CANARY}", timeout=10_000)
    ref = await page.get_attribute(f"li.hit:has-text('{CANARY}')", "data-ref")
    await tab_to(page, f"li.hit[data-ref='{ref}'] button")
    await page.keyboard.press("Enter")
    await page.wait_for_selector(f"li.hit.forgotten[data-ref='{ref}']", timeout=15_000)
    assert CANARY not in gw.memory.stores.for_user(s.user_id).read(f"memories/{s.today}.md")
    await shot(page, "desktop-keyboard-forget")
    assert page.kith_errors == []


async def test_the_operator_picks_whose_memory_to_see(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    await seed(gw, fake_anthropic)
    bob = await seed(gw, fake_anthropic, client_id="web-console-bob", name="Bob")
    gw.memory.stores.for_user(bob.user_id).write("people/Rosa.md", "# Rosa\n\n- Bob's neighbour\n", source="test")
    for size in ("phone", "desktop"):
        page = await open_console(browser, gw, size)
        await goto_view(page, "#/me/files", "What kith remembers")
        assert "people/Rosa.md" not in (await page.text_content("#view") or "")
        options = await page.eval_on_selector_all("#picker option", "os => os.map(o => o.value)")
        assert bob.user_id in options and len(options) >= 2
        assert "Bob" in (await page.text_content(f"#picker option[value='{bob.user_id}']") or "")
        await page.select_option("#picker", bob.user_id)
        await page.wait_for_function("() => location.hash.includes('/files')"
                                     " && document.querySelector('#view').textContent.includes('people/Rosa.md')",
                                     timeout=10_000)
        assert bob.user_id in await page.evaluate("decodeURIComponent(location.hash)")
        await shot(page, f"{size}-operator-picker")
        await page.context.close()
