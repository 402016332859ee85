"""The console's Schedule view at phone and desktop size: the person's reminders, scheduled prompts and
task alerts with their next time in the person's zone (not the browser's), the files' problems, and
Cancel marking the item in its file. Screenshots go to the console's screenshot directory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.testing import message
from tests.web.console_support import CLIENT, browser, goto_view, open_console, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser

REMINDERS = ("# Reminders\n\n- [ ] 2099-06-02 09:30 (Asia/Tokyo) call the dentist\n"
             "- [ ] every weekday at 08:00: stand-up notes\n- [ ] someday maybe: tidy the garage\n")


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_schedule_view_shows_times_in_the_persons_zone_and_cancels(
    size: str, browser: Any, make_gateway: Any
) -> None:
    gw = await make_gateway()
    await gw.handle_inbound(message("hello", account=CLIENT, name="Alice"))
    user = gw.identities.resolve(message("", account=CLIENT), create=False)
    assert user is not None
    gw.state.users.set_timezone(user.user_id, "Asia/Tokyo")
    store = gw.memory_store(user.user_id)
    store.write("REMINDERS.md", REMINDERS, source="test")
    store.write("CRONS.json", json.dumps({"crons": [{"when": "every Sunday at 19", "prompt": "ask me about my week"}]}),
                source="test")
    store.write("TASKS.json", json.dumps({"tasks": [{"id": "t1", "text": "file taxes", "status": "open",
                                                     "due": "2099-07-01"}]}), source="test")

    page = await open_console(browser, gw, size)
    await page.wait_for_selector("#nav a[aria-current=page]", timeout=10_000)
    assert await page.locator("#nav a", has_text="Schedule").count() == 1
    await goto_view(page, "#/me/schedule", "Scheduled prompts")
    view = await page.text_content("#view") or ""
    assert "Asia/Tokyo" in view
    assert "call the dentist" in view and "stand-up notes" in view and "ask me about my week" in view
    assert "file taxes" in view
    # 09:30 in Tokyo, shown as 09:30 whatever the browser's zone (the test browser runs in UTC).
    dentist = page.locator("li[data-item]", has_text="call the dentist")
    shown = await dentist.text_content() or ""
    assert "09:30" in shown and "00:30" not in shown
    assert "could not be scheduled" in view and "someday maybe" in view  # the bad line, kept and shown
    await shot(page, f"{size}-schedule")

    page.on("dialog", lambda d: d.accept())
    await page.get_by_role("button", name="Cancel: call the dentist").click()
    await page.wait_for_function(
        "() => !document.querySelector('#view').textContent.includes('call the dentist')", timeout=10_000)
    assert "- [-] 2099-06-02 09:30 (Asia/Tokyo) call the dentist" in store.read("REMINDERS.md")
    await page.get_by_label("Show sent, done and cancelled items").check()
    await page.wait_for_function(
        "() => document.querySelector('#view').textContent.includes('cancelled')", timeout=10_000)
    await shot(page, f"{size}-schedule-cancelled")
    assert page.kith_errors == []
