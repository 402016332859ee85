"""Issue 32, "every action, approved or denied, is written to an audit the console shows": the console's
Approvals view at phone and desktop size. Alice and Bob answer a third-party plugin's acting tool in
chat (approved and done, denied, another person's answer refused, expired with nobody answering, a long
summary); the operator sees everyone's steps with time, person, tool, outcome and summary and filters
them; Bob, signed in as himself, sees his own and nothing of Alice's."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from gateway.testing import message
from gateway.tools import approvals
from tests.fakes.anthropic import FakeAnthropic
from tests.tools.test_approvals import Outbox
from tests.web.console_support import CLIENT, browser, goto_view, open_console, shot
from tests.web.test_console_access import TOKEN, signin_link

__all__ = ["browser"]
pytestmark = pytest.mark.browser
BOB = "web-console-bob"
LONG = "Dear committee, " + "the lighthouse restoration needs another survey of the lantern room " * 3


async def ask(gw: Any, fake: FakeAnthropic, account: str, name: str, args: dict[str, str]) -> str:
    fake.enqueue_tool_use("send_note", args)
    fake.enqueue("asked")
    await gw.handle_inbound(message("send it", account=account, name=name))
    (result,) = fake.tool_results()
    found = re.search(r"/approve ([0-9a-f]{6})", str(result["content"]))
    assert found is not None, result
    return found.group(1)


async def say(gw: Any, text: str, account: str, name: str) -> str:
    reply = await gw.handle_inbound(message(text, account=account, name=name))
    assert reply is not None
    return reply.text


async def steps(gw: Any, fake: FakeAnthropic) -> dict[str, str]:
    ids = {"done": await ask(gw, fake, CLIENT, "Alice", {"to": "Sam", "text": "the boat is at pier 17"})}
    assert (await say(gw, f"/approve {ids['done']}", CLIENT, "Alice")) == "sent to Sam"
    ids["denied"] = await ask(gw, fake, CLIENT, "Alice", {"to": "Mallory", "text": "my door code"})
    assert "no pending approval" in await say(gw, f"/approve {ids['denied']}", BOB, "Bob")
    assert (await say(gw, f"/deny {ids['denied']}", CLIENT, "Alice")).startswith("Denied")
    ids["long"] = await ask(gw, fake, CLIENT, "Alice", {"to": "the harbour committee", "text": LONG})
    assert (await say(gw, f"/approve {ids['long']}", CLIENT, "Alice")) == "sent to the harbour committee"
    ids["bob"] = await ask(gw, fake, BOB, "Bob", {"to": "Alice", "text": "sailing on Sunday?"})
    assert (await say(gw, f"/approve {ids['bob']}", BOB, "Bob")) == "sent to Alice"
    # Nobody answers this one: the daemon's timer audits it as expired.
    ids["expired"] = await ask(gw, fake, CLIENT, "Alice", {"to": "Sam", "text": "never mind"})
    book = approvals(gw)
    book._pending[ids["expired"]] = replace(book._pending[ids["expired"]], expires_at=time.time())
    book._arm()
    for _ in range(200):  # bounded
        if ids["expired"] not in book._pending:
            break
        await asyncio.sleep(0.02)
    assert [e.approval_id for e in gw.state.approval_audit.page(outcome="expired")] == [ids["expired"]]
    return ids


async def rows(page: Any) -> list[dict[str, str]]:
    return await page.eval_on_selector_all(  # type: ignore[no-any-return]
        "table.audit tbody tr",
        "trs => trs.map(tr => Object.fromEntries([...tr.cells].map(td => [td.className, td.textContent.trim()])))")


async def until_rows(page: Any, count: int) -> None:
    await page.wait_for_function(f"() => document.querySelectorAll('table.audit tbody tr').length === {count}",
                                 timeout=10_000)  # fmt: skip


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_the_operator_sees_every_step_and_a_person_only_their_own(
    size: str, browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, plugins=(Outbox(),),
                            server={"port": 0, "token": TOKEN})  # fmt: skip
    await steps(gw, fake_anthropic)
    alice = gw.identities.lookup("websocket", CLIENT)
    bob = gw.identities.lookup("websocket", BOB)
    assert alice is not None and bob is not None

    async with aiohttp.ClientSession() as http, http.post(
        f"http://127.0.0.1:{gw.port}/api/session/links", json={"user": alice, "operator": True},
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as resp:
        assert resp.status == 200
        link = (await resp.json())["url"].split(str(gw.port), 1)[1]
    page = await open_console(browser, gw, size, path=link)
    await page.goto(f"http://127.0.0.1:{gw.port}/console")
    await page.wait_for_selector("#nav a[aria-current=page]", timeout=10_000)
    assert await page.locator("#nav a", has_text="Approvals").count() == 1
    await goto_view(page, "#/me/approvals", "Every step")
    await until_rows(page, 14)
    shown = await rows(page)
    assert [r["outcome"].split()[0] for r in shown] == [
        "expired", "requested", "done", "approved", "requested", "done", "approved", "requested",
        "denied", "refused", "requested", "done", "approved", "requested"]  # fmt: skip
    assert {r["person"] for r in shown} == {"Alice", "Bob"} and {r["tool"] for r in shown} == {"send_note"}
    assert all(r["at"] for r in shown)
    refused = [r for r in shown if r["outcome"].startswith("refused")]
    assert len(refused) == 1 and "another person answered" in refused[0]["outcome"] and refused[0]["person"] == "Alice"
    assert "Send 'the boat is at pier 17' to Sam." in shown[-1]["summary"]
    # A long summary shows its start; the whole of it opens on demand.
    long_row = page.locator("table.audit tr", has=page.locator("details")).first
    await long_row.locator("summary").click()
    assert LONG.strip() in (await long_row.locator("pre").text_content() or "")
    await shot(page, f"{size}-approvals-operator")

    await page.select_option("select[name=outcome]", "refused")
    await until_rows(page, 1)
    await page.select_option("select[name=outcome]", "")
    await page.select_option("select[name=user]", bob)
    await until_rows(page, 3)
    assert {r["person"] for r in await rows(page)} == {"Bob"}
    await shot(page, f"{size}-approvals-operator-bob")
    # Bob picked at the top: his steps from the start.
    await goto_view(page, "#/me/files", "What kith remembers")
    await goto_view(page, f"#/{bob}/approvals", "Every step")
    await until_rows(page, 3)
    assert await page.input_value("select[name=user]") == bob
    assert page.kith_errors == []
    await page.context.close()

    # Bob, signed in as himself: his own steps only, and no Person column or filter.
    page = await open_console(browser, gw, size, path=await signin_link(gw, bob))
    await page.goto(f"http://127.0.0.1:{gw.port}/console")
    await page.wait_for_selector("#nav a[aria-current=page]", timeout=10_000)
    await goto_view(page, "#/me/approvals", "Your approvals")
    await until_rows(page, 3)
    view = await page.text_content("#view") or ""
    assert "sailing on Sunday" in view and "pier 17" not in view and "door code" not in view
    assert await page.locator("select[name=user]").count() == 0 and await page.locator("td.person").count() == 0
    await shot(page, f"{size}-approvals-person")
    status = await page.evaluate("async () => (await fetch('/api/approvals')).status")
    assert status == 403
    assert await page.evaluate(f"async () => (await fetch('/api/users/{alice}/approvals')).status") == 404
    assert page.kith_errors == []
