"""The web chat takes files: picked with the paperclip, dropped on the page, pasted into the box; each
is uploaded at once, shown as a chip, and the message carries it to the model (headless Chromium at
1280 and 390 px; screenshots of the chip and the answered message)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.media.rig import media_files, png
from tests.web.chat_support import T, browser, open_chat, wait_until  # noqa: F401  (browser is a fixture)

pytestmark = pytest.mark.browser

READY = "document.querySelectorAll('#attachments .attachment:not(.uploading)').length === {n}"


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_files_go_with_the_message_from_the_page(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], size: str  # noqa: F811
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    chat = await open_chat(browser, gw, size, client_id=f"web-upload-{size}")
    page = chat.page
    assert await page.is_visible("#attach")
    assert await page.is_visible("#camera") == (size == "phone"), "the camera button is for phones"
    assert await page.get_attribute("#camera-input", "capture") == "environment"
    # The paperclip's file input, as a person picking a photo.
    await page.set_input_files("#attach-input", files=[{"name": "garden.png", "mimeType": "image/png",
                                                        "buffer": png(800, 600, (40, 160, 60))}])
    # A Markdown note dropped on the page.
    await page.evaluate("""() => {
        const dt = new DataTransfer();
        dt.items.add(new File(["# Plan\\nThe shed gets painted blue in April."], "plan.md", {type: "text/markdown"}));
        document.body.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""")
    await wait_until(page, READY.format(n=2))
    chips = await page.locator("#attachments .attachment > span").all_inner_texts()
    assert chips == ["garden.png", "plan.md"]
    await page.fill("#input", "what do you see, and what is the plan?")
    await chat.shot("upload-chips")
    fake_anthropic.enqueue("A green square; the shed will be blue.")
    before = await page.locator(".msg.bot:not(.streaming)").count()
    await page.press("#input", "Enter")
    await page.locator(".msg.bot:not(.streaming)").nth(before).wait_for(timeout=T)
    assert "the shed will be blue" in await page.locator(".msg.bot").last.inner_text()
    await chat.shot("upload-answered")
    assert await page.is_hidden("#attachments"), "the chips go with the message"
    blocks = _blocks(fake_anthropic.last_turn())
    images = [b for b in blocks if b["type"] == "image"]
    assert len(images) == 1 and base64.b64decode(images[0]["source"]["data"])
    text = " ".join(b.get("text", "") for b in blocks)
    assert "The shed gets painted blue in April." in text and "what is the plan?" in text
    user_id = gw.identities.lookup("websocket", f"web-upload-{size}")
    assert user_id is not None
    assert sorted(p.rsplit("-", 1)[-1] for p in media_files(gw.data_dir, user_id)) == ["garden.png", "plan.md",
                                                                                        "plan.md.md"]
    # A pasted screenshot, sent without any text.
    await page.evaluate("""async () => {
        const canvas = document.createElement("canvas");
        canvas.width = 320; canvas.height = 200;
        const g = canvas.getContext("2d");
        g.fillStyle = "#3050d0"; g.fillRect(0, 0, 320, 200);
        const blob = await new Promise((done) => canvas.toBlob(done, "image/png"));
        const dt = new DataTransfer();
        dt.items.add(new File([blob], "", {type: "image/png"}));
        document.getElementById("input").dispatchEvent(
            new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}));
    }""")
    await wait_until(page, READY.format(n=1))
    await chat.shot("upload-pasted")
    fake_anthropic.enqueue("A blue rectangle.")
    before = await page.locator(".msg.bot:not(.streaming)").count()
    await page.press("#input", "Enter")
    await page.locator(".msg.bot:not(.streaming)").nth(before).wait_for(timeout=T)
    # The sent message shows the pasted image itself, from the file on this device (docs/web.md#attachments).
    await wait_until(page, "[...document.querySelectorAll('.msg.me')].pop()?.querySelector('.msg-files img')"
                           "?.naturalWidth === 320")
    pasted = [b for b in _blocks(fake_anthropic.last_turn()) if b["type"] == "image"]
    assert len(pasted) == 1, "a pasted screenshot alone is a message"
    assert not chat.errors, chat.errors


async def test_removing_a_chip_takes_the_upload_back_from_the_daemon(
    browser: Any, make_gateway: Any  # noqa: F811
) -> None:
    import asyncio

    from gateway.media.uploads import uploads

    gw = await make_gateway()
    chat = await open_chat(browser, gw, "desktop", client_id="web-upload-cancel")
    page = chat.page
    await page.set_input_files("#attach-input", files=[{"name": "draft.png", "mimeType": "image/png",
                                                        "buffer": png(200, 100)}])  # fmt: skip
    await wait_until(page, READY.format(n=1))
    user_id = gw.identities.lookup("websocket", "web-upload-cancel")
    assert user_id is not None and uploads(gw).held_by(user_id) > 0
    await page.click("#attachments .attachment .remove")
    assert await page.is_hidden("#attachments")
    deadline = asyncio.get_running_loop().time() + T / 1000
    while uploads(gw).held_by(user_id):  # the DELETE is on its way
        assert asyncio.get_running_loop().time() < deadline, "the removed upload is still held"
        await asyncio.sleep(0.05)
    assert not chat.errors, chat.errors
