"""The chat page keeps the conversation: replay on reload, past sessions found and opened read-only,
the Off-The-Record label kept true, and a draft never lost (headless Chromium, phone and desktop)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.web.chat_support import SIZES as CHAT_SIZES
from tests.web.chat_support import T, browser, open_chat, shot, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser
SIZES = ["desktop", "phone"]


async def test_reload_shows_the_conversation(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    # each size is a person of its own, from an empty conversation
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        fake_anthropic.enqueue("First answer with a **bold** word.")
        fake_anthropic.enqueue("Second answer:\n\n1. one\n2. two")
        chat = await open_chat(browser, gw, size, client_id=f"web-reload_shows_the_con-{size}")
        await chat.reply_after("first question")
        await chat.reply_after("second question")
        await chat.page.reload()
        page = chat.page
        await page.wait_for_selector("#conn.on")
        await wait_until(page, "document.querySelectorAll('#log .msg').length >= 4")
        mine = await page.locator("#log .msg.me").all_inner_texts()
        bots = page.locator("#log .msg.bot")
        assert mine == ["first question", "second question"]
        assert await bots.count() == 2
        assert await bots.nth(0).locator("strong").inner_text() == "bold"  # replayed replies are Markdown too
        assert await bots.nth(1).locator("ol > li").count() == 2
        assert not await page.locator(".load-earlier").count()  # everything fits one page
        await chat.shot("reloaded")
        assert not chat.errors, chat.errors


async def test_load_earlier_pages_back_through_a_long_session(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],  # noqa: F811
    ws_connect: Any,
) -> None:
    gw = await make_gateway(llm=anthropic_llm, server={"port": 0, "rate_limit": {"burst": 100}})
    client = await ws_connect(gw)
    await client.hello("web-long-session")
    for i in range(27):  # 54 messages: more than the page's first page of 50
        fake_anthropic.enqueue(f"answer {i}")
        frame, _ = await client.ask(f"question {i}")
        assert frame["type"] == "reply", frame
    chat = await open_chat(browser, gw, "desktop", client_id="web-long-session")
    page = chat.page
    await page.wait_for_selector(".load-earlier")
    assert await page.locator("#log .msg").count() == 50
    assert await page.locator("#log .msg").first.inner_text() == "question 2"
    await page.click(".load-earlier")
    await wait_until(page, "document.querySelectorAll('#log .msg').length === 54")
    texts = await page.locator("#log .msg").all_inner_texts()
    assert [t.strip() for t in texts[:4]] == ["question 0", "answer 0", "question 1", "answer 1"]
    assert texts[-1].strip() == "answer 26"
    assert not await page.locator("#log .load-earlier").count()
    # The same session opened from History pages back the same way, through the API.
    await page.click("#sessions-btn")
    await page.click("#sessions .session-item")
    await page.wait_for_selector("#archive .load-earlier")
    assert await page.locator("#archive .msg").count() == 50
    await page.click("#archive .load-earlier")
    await wait_until(page, "document.querySelectorAll('#archive .msg').length === 54")
    assert (await page.locator("#archive .msg").first.inner_text()).strip() == "question 0"
    assert not await page.locator("#archive .load-earlier").count()
    assert not chat.errors, chat.errors


async def test_a_past_session_is_found_by_search_and_opened_read_only(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    # each size is a person of its own, from an empty conversation
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        fake_anthropic.enqueue("Zebras migrate with the *rains*.")
        fake_anthropic.enqueue("Sure, a new topic.")
        chat = await open_chat(browser, gw, size, client_id=f"web-a_past_session_is_fo-{size}")
        page = chat.page
        await chat.reply_after("tell me about the zebra migration")
        await chat.reply_after("/new", notice=True)
        await chat.reply_after("something else entirely")
        await page.click("#sessions-btn")
        await page.wait_for_selector("#sessions[open] .session-item")
        assert await page.locator("#sessions .session-item").count() == 2
        await chat.shot("sessions")
        await page.fill("#search", "zebra")
        await page.press("#search", "Enter")
        await wait_until(page, "document.querySelectorAll('#sessions .session-item').length === 1")
        await chat.shot("search")
        await page.click("#sessions .session-item")
        await page.wait_for_selector("#archive .msg.bot")
        assert await page.is_hidden("#composer") and await page.is_hidden("#log")
        assert await page.is_visible("#archive-bar")
        archive = await page.locator("#archive .msg").all_inner_texts()
        assert archive[0] == "tell me about the zebra migration"
        assert "Zebras migrate" in archive[1]
        assert await page.locator("#archive .msg.bot em").inner_text() == "rains"
        assert not any("something else" in t for t in archive)
        await chat.shot("archive")
        await page.keyboard.press("Escape")  # back to the live chat
        await page.wait_for_selector("#composer:not([hidden])")
        assert "something else entirely" in await page.locator("#log").inner_text()
        assert not chat.errors, chat.errors


async def test_off_the_record_label_follows_otr_on_off_and_new(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    # each size is a person of its own, from an empty conversation
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        chat = await open_chat(browser, gw, size, client_id=f"web-off_the_record_label-{size}")
        page = chat.page
        assert await page.is_hidden("#otr")
        await chat.reply_after("/otr on", notice=True)
        await page.wait_for_selector("#otr:not([hidden])")
        assert await page.evaluate("document.body.classList.contains('otr')")
        assert (await page.text_content("#session") or "").startswith("otr ") or size == "phone"
        await chat.shot("otr-on")
        await chat.reply_after("/otr off", notice=True)
        await page.wait_for_selector("#otr[hidden]", state="attached")
        await chat.reply_after("/otr on", notice=True)
        await page.wait_for_selector("#otr:not([hidden])")
        await chat.reply_after("/new", notice=True)
        await page.wait_for_selector("#otr[hidden]", state="attached")
        assert not await page.evaluate("document.body.classList.contains('otr')")
        # The settings switch shows the same state, and turning it on there is /otr on.
        await page.click("#settings-btn")
        await page.wait_for_selector("#settings[open]")
        assert not await page.is_checked("#s-otr")
        await page.click("#s-otr")
        await page.wait_for_selector("#otr:not([hidden])")
        await wait_until(page, "document.getElementById('s-otr').checked")
        assert "On" in await page.inner_text("#s-otr-label")
        await chat.shot("settings-otr")
        assert not chat.errors, chat.errors


async def test_an_over_long_draft_is_refused_in_the_page_and_kept(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    # each size is a person of its own, from an empty conversation
    gw = await make_gateway(llm=anthropic_llm, server={"local_owner": False})
    for size in SIZES:  # one gateway, a desktop and a phone browser in turn
        chat = await open_chat(browser, gw, size, client_id=f"web-an_over_long_draft_i-{size}")
        page = chat.page
        asked = len(fake_anthropic.turn_requests())
        draft = "x" * 32_001
        await chat.send(draft)
        await page.wait_for_selector("#composer-error:not([hidden])")
        assert "32,000" in await page.inner_text("#composer-error")
        assert await page.input_value("#input") == draft
        assert await page.locator("#log .msg.me").count() == 0
        assert len(fake_anthropic.turn_requests()) == asked
        await chat.shot("too-long")
        # Multi-byte text within the character limit can still exceed the frame limit: refused too.
        await chat.send("🦓" * 20_000)
        await page.wait_for_selector("#composer-error:has-text('bytes')")
        assert await page.input_value("#input") == "🦓" * 20_000
        # The draft survives a reload (kept in the browser while typed).
        await page.fill("#input", "half-written thought")
        await page.reload()
        await page.wait_for_selector("#conn.on")
        assert await page.input_value("#input") == "half-written thought"
        # Shortened, it goes.
        fake_anthropic.enqueue("got it")
        await chat.reply_after("short now")
        assert await page.is_hidden("#composer-error")
        assert await page.input_value("#input") == ""
        assert not chat.errors, chat.errors


async def test_reconnect_replays_what_happened_meanwhile_and_a_refused_message_stays_in_the_box(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],  # noqa: F811
    ws_connect: Any,
) -> None:
    gw = await make_gateway(llm=anthropic_llm, server={"port": 0, "rate_limit": {"burst": 2,
                                                                                 "messages_per_minute": 1}})
    chat = await open_chat(browser, gw, "desktop", client_id="web-reconnect")
    page = chat.page
    fake_anthropic.enqueue("one")
    await chat.reply_after("from the page")
    # The server drops the page's connection; meanwhile the same client says something elsewhere.
    adapter: Any = gw.adapters["websocket"]
    for conn in list(adapter.connections["web-reconnect"]):
        await conn.ws.close()
    other = await ws_connect(gw)
    await other.hello("web-reconnect")
    fake_anthropic.enqueue("two")
    await other.ask("from elsewhere")
    await page.wait_for_selector("#conn.on")
    await wait_until(page, "document.querySelectorAll('#log .msg').length === 4")
    texts = [t.strip() for t in await page.locator("#log .msg").all_inner_texts()]
    assert texts == ["from the page", "one", "from elsewhere", "two"]  # replayed once, nothing doubled
    # The per-user bucket (2 messages) is empty now: the server refuses, the draft comes back.
    await chat.send("please keep me")
    await page.wait_for_selector("#composer-error:not([hidden])")
    assert await page.input_value("#input") == "please keep me"
    assert "back in the box" in await page.inner_text("#composer-error")
    assert await page.locator("#log .msg.me", has_text="please keep me").count() == 0
    await chat.shot("refused")
    assert not chat.errors, chat.errors


async def test_past_sessions_found_by_meaning(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    chat = await open_chat(browser, gw, "desktop")
    page = chat.page
    fake_anthropic.enqueue("They follow the rains across the Serengeti.")
    await chat.reply_after("tell me about the zebra migration")
    await chat.reply_after("/new", notice=True)
    fake_anthropic.enqueue("Water them in the morning.")
    await chat.reply_after("my tomato plants are wilting in the garden")
    await gw.settle()  # the session turns are indexed for recall
    await page.click("#sessions-btn")
    await page.fill("#search", "wild animals crossing the savanna")
    await page.select_option("#search-mode", "semantic")
    await page.press("#search", "Enter")
    await page.wait_for_selector("#sessions-status:has-text('matching')")
    first = page.locator("#sessions .session-item .title").first
    assert await first.inner_text() == "tell me about the zebra migration"
    await chat.shot("search-meaning")
    assert not chat.errors, chat.errors


async def test_with_a_token_the_page_asks_for_it_and_the_panels_work_with_it(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]  # noqa: F811
) -> None:
    token = "t0ken-for-the-web-chat-test-0123456789"
    gw = await make_gateway(llm=anthropic_llm, server={"port": 0, "token": token})
    context = await browser.new_context(**CHAT_SIZES["phone"])
    page = await context.new_page()
    await page.goto(f"http://127.0.0.1:{gw.port}/")
    await page.wait_for_selector("#auth[open]")  # no automatic sign-in when a token is configured
    await shot(page, "token", "phone")
    await page.fill("#token", token)
    await page.press("#token", "Enter")
    await page.wait_for_selector("#conn.on")
    fake_anthropic.enqueue("hello with a token")
    await page.fill("#input", "hi")
    await page.press("#input", "Enter")
    await page.wait_for_selector(".msg.bot:not(.streaming)")
    # The panels speak the API with the token, for the user the socket named.
    await page.click("#sessions-btn")
    await page.wait_for_selector("#sessions .session-item")
    assert await page.inner_text("#sessions .session-item .title") == "hi"
