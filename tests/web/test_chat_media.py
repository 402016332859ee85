"""Files in the chat (docs/web.md#attachments): an image a person sent shows as a thumbnail and a
document as a chip, live, after a reload and in History; the media route serves a person's own files
only, images inline and everything else as a download."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.media.rig import media_files, png, signed_in_browser
from tests.signin.rig import url
from tests.web.chat_support import T, browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

READY = "document.querySelectorAll('#attachments .attachment:not(.uploading)').length === 2"
LAST_MINE = "[...document.querySelectorAll('{root} .msg.me')].pop()"


async def test_the_media_route_serves_a_persons_own_files_only(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    alice = await signed_in_browser(gw, "alice-phone")
    bob = await signed_in_browser(gw, "bob-phone")
    try:
        _, up_png = await alice.upload(png(40, 30), "garden.png", "image/png")
        _, up_md = await alice.upload(b"# Plan\nPaint the shed.", "plan.md", "text/markdown")
        reply = await alice.send("look", [up_png["upload_id"], up_md["upload_id"]])
        assert reply["type"] == "reply", reply
        stored = media_files(gw.data_dir, alice.user_id)
        image = next(p for p in stored if p.endswith("garden.png"))
        doc = next(p for p in stored if p.endswith("plan.md"))

        async with alice.http.get(url(gw, f"/api/users/me/media/{image}")) as resp:
            assert resp.status == 200 and resp.content_type == "image/png"
            assert await resp.read() == (gw.data_dir / "users" / alice.user_id / image).read_bytes()
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            assert resp.headers["Cross-Origin-Resource-Policy"] == "same-origin"
            assert resp.headers["Content-Disposition"].startswith("inline")
            etag = resp.headers["ETag"]
        async with alice.http.get(url(gw, f"/api/users/me/media/{image}"), headers={"If-None-Match": etag}) as resp:
            assert resp.status == 304
        # Not an image by its bytes: a download, never a page of this origin.
        async with alice.http.get(url(gw, f"/api/users/{alice.user_id}/media/{doc}")) as resp:
            assert resp.status == 200 and resp.content_type == "application/octet-stream"
            assert resp.headers["Content-Disposition"].startswith("attachment")
            assert "sandbox" in resp.headers["Content-Security-Policy"]
        # Only media/, only the person's own, only signed in.
        for who, path, status in [
            (alice, "/api/users/me/media/USER.md", 404),
            (alice, "/api/users/me/media/media/..%2F..%2Fusers.db", 400),
            (bob, f"/api/users/{alice.user_id}/media/{image}", 404),
            (bob, f"/api/users/me/media/{image}", 404),
        ]:
            async with who.http.get(url(gw, path)) as resp:
                assert resp.status in (status, 404), (path, resp.status)
                assert resp.content_type == "application/json"
        nobody = aiohttp.ClientSession()
        async with nobody, nobody.get(url(gw, f"/api/users/{alice.user_id}/media/{image}")) as resp:
            assert resp.status == 401
    finally:
        await alice.close()
        await bob.close()


@pytest.mark.browser
@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_an_image_shows_as_a_thumbnail_live_after_reload_and_in_history(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], size: str,  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    chat = await open_chat(browser, gw, size, client_id=f"web-media-{size}")
    page = chat.page
    await page.set_input_files("#attach-input", files=[
        {"name": "garden.png", "mimeType": "image/png", "buffer": png(320, 240, (40, 160, 60))},
        {"name": "plan.md", "mimeType": "text/markdown", "buffer": b"# Plan\nThe shed gets painted blue."}])
    await wait_until(page, READY)
    await page.fill("#input", "my garden, and the plan")
    fake_anthropic.enqueue("A green garden; the shed will be blue.")
    await page.press("#input", "Enter")
    await page.locator(".msg.bot:not(.streaming)").first.wait_for(timeout=T)
    # Live: the photo from this device, the document as a chip.
    mine = LAST_MINE.format(root="#log")
    await wait_until(page, f"{mine}.querySelector('.msg-files img')?.naturalWidth === 320")
    assert await page.locator("#log .msg.me .file-chip").inner_text() == "plan.md"
    await chat.shot("media-live")

    await page.reload()
    await page.wait_for_selector("#conn.on")
    await wait_until(page, f"{mine}?.querySelector('.msg-files img')?.naturalWidth === 320")
    assert await page.locator("#log .msg.me").inner_text() == "my garden, and the plan\nplan.md"
    src = await page.locator("#log .msg.me .msg-files img").get_attribute("src")
    assert src and src.startswith("/api/users/me/media/media/") and src.endswith("-garden.png"), src
    assert await page.locator("#log .msg.me .msg-files img").get_attribute("alt") == "garden.png"
    chip = page.locator("#log .msg.me a.file-chip")
    assert (await chip.get_attribute("href") or "").endswith("-plan.md")
    assert "](media/" not in await page.locator("#log").inner_text(), "no raw link text"
    await chat.shot("media-reloaded")

    # History: the same conversation, opened read-only.
    await page.click("#sessions-btn")
    item = page.locator("#sessions-list button.session-item").first
    await item.wait_for()
    assert await item.locator(".title").inner_text() == "my garden, and the plan garden.png plan.md"
    await item.click()
    archived = LAST_MINE.format(root="#archive")
    await wait_until(page, f"{archived}?.querySelector('.msg-files img')?.naturalWidth === 320")
    assert await page.locator("#archive .msg.me a.file-chip").count() == 1
    await chat.shot("media-history")
    assert not chat.errors, chat.errors
