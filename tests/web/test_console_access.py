"""Who may see what in the console: a person signed in by link reaches only their own memory (every URL
of another person's is a 404 and changes nothing); the operator approves and denies pairing requests."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from gateway.testing import message
from gateway.types import InboundMessage
from tests.fakes.anthropic import FakeAnthropic
from tests.web.console_support import CLIENT, browser, goto_view, open_console, seed, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser
TOKEN = "console-test-operator-token-0123456789"

# Every console URL of a person's memory: (method, path under /api/users/<uid>, JSON body or None).
ROUTES = [
    ("GET", "/memory/files", None), ("GET", "/memory/files/USER.md", None),
    ("PUT", "/memory/files/USER.md", {"text": "# owned\n", "etag": ""}),
    ("GET", "/facts?include_superseded=1", None), ("DELETE", "/facts/{fact}", None),
    ("GET", "/recall?q=boat&k=5", None), ("POST", "/forget", {"text": "boat"}),
    ("GET", "/quarantine", None), ("GET", "/curation", None), ("POST", "/curation/{run}/rollback", {}),
    ("GET", "/distill", None), ("GET", "/sessions", None), ("GET", "/sessions/{session}/messages", None),
    ("GET", "/turns/{turn}/context", None), ("PATCH", "/settings", {"display_name": "Mallory"}),
]


async def signin_link(gw: Any, user_id: str) -> str:
    async with aiohttp.ClientSession() as http, http.post(
        f"http://127.0.0.1:{gw.port}/api/session/links", json={"user": user_id},
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as resp:
        assert resp.status == 200, await resp.text()
        url = urlsplit((await resp.json())["url"])
    return f"{url.path}?{url.query}"


FETCH_ALL = """async ([uid, routes]) => {
  const me = await (await fetch('/api/me')).json();
  const out = [];
  for (const [method, path, body] of routes) {
    const headers = { 'X-CSRF-Token': me.csrf };
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    const init = { method, headers, body: body === null ? undefined : JSON.stringify(body) };
    const r = await fetch(`/api/users/${uid}${path}`, init);
    out.push([method, path, r.status]);
  }
  return out;
}"""


@pytest.mark.parametrize("size", ["phone", "desktop"])
async def test_a_person_cannot_open_another_persons_memory(
    size: str, browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm, server={"port": 0, "token": TOKEN})
    bob = await seed(gw, fake_anthropic, client_id="web-console-bob", name="Bob")
    fake_anthropic.enqueue("Hello Alice.")
    await gw.handle_inbound(message("Hi, I am Alice.", account=CLIENT, name="Alice"))
    alice = gw.identities.resolve(message("", account=CLIENT), create=False)
    assert alice is not None and alice.user_id != bob.user_id
    bob_user_md = gw.memory.stores.for_user(bob.user_id).read("USER.md")

    # With a token configured nobody is signed in automatically: the page says how to get a link.
    stranger_page = await open_console(browser, gw, size)
    await stranger_page.wait_for_selector("text=Not signed in", timeout=10_000)
    assert "login-link" in (await stranger_page.text_content("#view") or "")
    await shot(stranger_page, f"{size}-not-signed-in")
    await stranger_page.context.close()

    page = await open_console(browser, gw, size, path=await signin_link(gw, alice.user_id))
    await page.goto(f"http://127.0.0.1:{gw.port}/console")
    await page.wait_for_selector("#nav a[aria-current=page]", timeout=10_000)
    assert "operator" not in (await page.text_content("#me") or "")
    assert await page.is_hidden("#picker-wrap")
    assert await page.locator("#nav a", has_text="Pairing").count() == 0
    await goto_view(page, "#/me/files", "What kith remembers")

    await goto_view(page, f"#/{bob.user_id}/files", "Not found")
    assert "USER.md" not in (await page.text_content("#view") or "")
    await shot(page, f"{size}-other-person-not-found")
    await goto_view(page, f"#/{bob.user_id}/file/USER.md", "Not found")
    await goto_view(page, f"#/{bob.user_id}/facts", "Not found")

    routes = [[m, p.format(fact=bob.fact_ids["munich"], run=bob.run_id, session=bob.session_id, turn=bob.turn_id), b]
              for m, p, b in ROUTES]
    answers = await page.evaluate(FETCH_ALL, [bob.user_id, routes])
    # 404 as for a user that does not exist; the quarantine is the operator's to review (403 to any person).
    assert [a for a in answers if a[2] != (403 if a[1] == "/quarantine" else 404)] == []
    # Nothing of Bob's changed; the operator-only routes answer a person with 403.
    assert gw.memory.stores.for_user(bob.user_id).read("USER.md") == bob_user_md
    assert gw.kg.get(bob.fact_ids["munich"]) is not None
    status = await page.evaluate("async () => (await fetch('/api/pairing')).status")
    assert status == 403
    assert page.kith_errors == []


def stranger(account: str) -> InboundMessage:
    return InboundMessage(channel="telegram", account_id=account, text="hello?", conversation_id=account,
                          display_name=f"Stranger {account[-2:]}")


async def test_the_operator_approves_and_denies_pairing_requests(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    await seed(gw, fake_anthropic)
    for account in ("5550101", "5550102"):
        reply = await gw.handle_inbound(stranger(account))
        assert reply is not None and reply.text  # the pairing code, and no model call

    for size in ("phone", "desktop"):
        page = await open_console(browser, gw, size)
        await goto_view(page, "#/me/pairing", "5550101")
        await shot(page, f"{size}-pairing-requests")
        await page.context.close()

    page = await open_console(browser, gw, "desktop")
    await goto_view(page, "#/me/pairing", "5550101")
    turns_before = len(fake_anthropic.turn_requests())
    first = page.locator("ul.pairs li", has_text="5550101")
    await first.locator("button", has_text="Approve").click()
    await page.wait_for_selector("ul.pairs li >> text=5550101", state="detached", timeout=10_000)
    second = page.locator("ul.pairs li", has_text="5550102")
    await second.locator("button", has_text="Deny").click()
    await page.wait_for_selector("text=No pairing requests waiting", timeout=10_000)

    # The approved stranger now reaches the model; the denied one does not.
    fake_anthropic.enqueue("Welcome!")
    reply = await gw.handle_inbound(stranger("5550101"))
    assert reply is not None and reply.text == "Welcome!"
    assert len(fake_anthropic.turn_requests()) == turns_before + 1
    await gw.handle_inbound(stranger("5550102"))
    await asyncio.sleep(0)
    assert len(fake_anthropic.turn_requests()) == turns_before + 1
    assert page.kith_errors == []
