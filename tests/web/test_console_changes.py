"""Changing memory from the console: edits are conflict-safe and audited, a deleted fact is gone from the
next prompt, "forget this" on a recalled canary keeps it out of 200 later recalls, a curation run rolls back.

Every change is made by clicking in the page (Chromium), and checked where it matters: the files on disk,
the request the model receives (the fake Anthropic server) and recall through the person API.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.memory.files.scopes import user_scope
from gateway.testing import message
from tests.fakes.anthropic import FakeAnthropic
from tests.web.console_support import CANARY, CLIENT, browser, goto_view, open_console, seed, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser


def accept_dialogs(page: Any) -> None:
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))


async def test_a_file_edit_is_saved_audited_and_never_overwrites_a_newer_version(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    s = await seed(gw, fake_anthropic)
    store = gw.memory.stores.for_user(s.user_id)
    page = await open_console(browser, gw, "desktop")
    await goto_view(page, "#/me/file/PATTERNS.md", "Writes late in the evening")
    await page.click("text=Edit")
    await page.fill("textarea.editor", "# Patterns\n\n- Writes early in the morning now\n")
    await page.keyboard.press("Control+s")  # the keyboard shortcut, as a keyboard-only person saves
    await page.wait_for_selector("article.doc >> text=Writes early in the morning now", timeout=10_000)
    assert store.read("PATTERNS.md") == "# Patterns\n\n- Writes early in the morning now\n"
    audit = [json.loads(line) for line in
             (gw.memory.stores.root_for(user_scope(s.user_id)) / ".audit.jsonl").read_text().splitlines()]
    assert any(a["file"] == "PATTERNS.md" and a["source"].startswith("api:") for a in audit)

    # A background job writes while the person edits: saving the stale copy is refused, nothing is lost.
    await page.click("text=Edit")
    await page.fill("textarea.editor", "# Patterns\n\n- My own edit\n")
    store.write("PATTERNS.md", "# Patterns\n\n- Written by the night job\n", source="test")
    await page.click("button[type=submit]")
    await page.wait_for_selector("text=changed since you opened it", timeout=10_000)
    assert store.read("PATTERNS.md") == "# Patterns\n\n- Written by the night job\n"
    await shot(page, "desktop-edit-conflict")
    await page.click("button:has-text('Load the new version')")
    await page.wait_for_selector("details.newer >> text=Written by the night job", timeout=10_000)
    assert await page.input_value("textarea.editor") == "# Patterns\n\n- My own edit\n"  # the draft is kept
    await page.click("button[type=submit]")
    await page.wait_for_selector("article.doc >> text=My own edit", timeout=10_000)
    assert store.read("PATTERNS.md") == "# Patterns\n\n- My own edit\n"
    assert page.kith_errors == []


async def test_a_fact_deleted_in_the_console_is_absent_from_the_next_prompt(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    s = await seed(gw, fake_anthropic)
    fake_anthropic.enqueue("Let me think.")
    await gw.handle_inbound(message("What do you know about Marguerite?", account=CLIENT, name="Alice"))
    assert "Valparaíso" in fake_anthropic.system_of(fake_anthropic.last_turn())  # the fact reaches the prompt

    page = await open_console(browser, gw, "phone")
    accept_dialogs(page)
    await goto_view(page, "#/me/facts", "Valparaíso")
    fact = page.locator(f"li.fact[data-fact='{s.fact_ids['marguerite']}']")
    await fact.locator("button", has_text="Delete").click()
    await page.wait_for_selector(f"li.fact[data-fact='{s.fact_ids['marguerite']}']", state="detached", timeout=10_000)
    assert gw.kg.get(s.fact_ids["marguerite"]) is None

    fake_anthropic.enqueue("Still thinking.")
    await gw.handle_inbound(message("What do you know about Marguerite?", account=CLIENT, name="Alice"))
    assert "Valparaíso" not in fake_anthropic.system_of(fake_anthropic.last_turn())
    assert page.kith_errors == []


RECALL_LOOP = """async ([uid, queries, n, canary]) => {
  let found = 0, calls = 0;
  for (let i = 0; i < n; i++) {
    const q = queries[i % queries.length];
    const r = await fetch(`/api/users/${uid}/recall?q=${encodeURIComponent(q)}&k=10`, {credentials: 'same-origin'});
    if (!r.ok) throw new Error('recall failed: ' + r.status);
    const { hits } = await r.json();
    calls++;
    found += hits.filter((h) => h.text.includes(canary)).length;
  }
  return { found, calls };
}"""

QUERIES = ["locker code canary", CANARY, "what is the locker code?", "marina office", "canary at the marina",
           "ZEBRA QUOKKA code", "where is the locker code kept"]


async def test_forget_this_on_a_recalled_canary_keeps_it_out_of_200_recalls(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    s = await seed(gw, fake_anthropic)
    page = await open_console(browser, gw, "desktop")
    accept_dialogs(page)
    await goto_view(page, "#/me/recall/locker code canary", CANARY)
    before = await page.evaluate(RECALL_LOOP, ["me", QUERIES, 7, CANARY])
    assert before["found"] > 0  # recalled before: the check below can fail
    await shot(page, "desktop-recall-before-forget")
    hit = page.locator("li.hit", has_text=CANARY).first
    await hit.locator("button", has_text="Forget this").click()
    await page.wait_for_selector("li.hit.forgotten", timeout=15_000)
    await gw.settle()
    assert CANARY not in gw.memory.stores.for_user(s.user_id).read(f"memories/{s.today}.md")
    after = await page.evaluate(RECALL_LOOP, ["me", QUERIES, 200, CANARY])
    assert after == {"found": 0, "calls": 200}
    await shot(page, "desktop-recall-after-forget")
    assert page.kith_errors == []


async def test_a_curation_run_is_rolled_back_from_the_audit(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    s = await seed(gw, fake_anthropic)
    store = gw.memory.stores.for_user(s.user_id)
    assert "Drinks oat milk" in store.read("USER.md")
    page = await open_console(browser, gw, "phone")
    accept_dialogs(page)
    await goto_view(page, "#/me/review", "Drinks oat milk")
    await page.click("li.run >> text=Roll back")
    await page.wait_for_selector("li.run >> text=restored", timeout=10_000)
    assert "Drinks oat milk" not in store.read("USER.md")
    assert store.read("USER.md").startswith("# Alice")
    assert page.kith_errors == []
