"""The console's Tidy view (memory hygiene proposals) at phone and desktop size: the proposals are
shown with exactly what they change, Reject drops one and Accept applies one through the guarded store.
Screenshots of each state go to the console's screenshot directory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.memory.hygiene import proposals as stored
from gateway.memory.hygiene.run import run_hygiene
from gateway.testing import message
from tests.fakes.anthropic import FakeAnthropic
from tests.web.console_support import CLIENT, browser, goto_view, open_console, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser

SAM = "# Sam Reed\n\nAlice's sailing partner since 2019; they race the Mira on Sundays.\n\n## Aliases\n- Sammy\n"
SAMMY = "# Sammy\n\n- Keeps the boat at [pier 17](../topics/sailing.md).\n- Allergic to peanuts.\n"
USER = "# Alice\n\n- Lives in Leeds.\n- Lives in York since March.\n- Prefers tea over coffee.\n"


def judge(body: dict[str, Any]) -> str | None:
    system = body.get("system", "")
    text = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)
    if "You tidy a personal assistant's memory" not in text:
        return None
    return json.dumps({"proposals": [{"kind": "conflict", "file": "USER.md", "lines": [3, 4],
                                      "replace_with": "- Lives in York (moved from Leeds in March).",
                                      "why": "She cannot live in both."}]})


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_tidy_view_lists_rejects_and_accepts(
    size: str, browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    fake_anthropic.responders.append(judge)
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.handle_inbound(message("hello", account=CLIENT, name="Alice"))
    user = gw.identities.resolve(message("", account=CLIENT), create=False)
    assert user is not None
    store = gw.memory_store(user.user_id)
    store.write("USER.md", USER, source="test")
    store.write("people/sam.md", SAM, source="test")
    store.write("people/telegram-42.md", SAMMY, source="test")
    sailing = "# Sailing\n\nWith [Sam](../people/sam.md) and [Sammy](../people/telegram-42.md).\n"
    store.write("topics/sailing.md", sailing, source="test")
    report = await run_hygiene(gw, user.user_id)
    assert sorted(p.kind for p in report.added) == ["conflict", "merge"]

    page = await open_console(browser, gw, size)
    await page.wait_for_selector("#nav a[aria-current=page]", timeout=10_000)
    assert await page.locator("#nav a", has_text="Tidy").count() == 1
    await goto_view(page, "#/me/tidy", "Waiting for you")
    view = await page.text_content("#view") or ""
    assert "Merge people/telegram-42.md into people/sam.md" in view and "Conflicting lines in USER.md" in view
    assert "Lives in York (moved from Leeds in March)" in view
    await shot(page, f"{size}-tidy")

    # Reject the conflict: nothing changes in the file.
    await page.get_by_role("button", name="Reject: Conflicting lines in USER.md: replace 2 line(s)").click()
    await page.wait_for_function("() => document.querySelector('#view').textContent.includes('Recently decided')",
                                 timeout=10_000)
    assert store.read("USER.md") == USER
    # Accept the merge: applied exactly, through the guarded store.
    merge = next(p for p in stored.pending(store.root) if p.kind == "merge")
    await page.get_by_role("button", name=f"Accept: {merge.title}").click()
    await page.wait_for_function("() => document.querySelector('#view').textContent.includes('Nothing to tidy')",
                                 timeout=10_000)
    assert not store.exists("people/telegram-42.md")
    assert "## Merged from people/telegram-42.md" in store.read("people/sam.md")
    assert "(../people/telegram-42.md)" not in store.read("topics/sailing.md")
    await shot(page, f"{size}-tidy-decided")
    assert page.kith_errors == []
