"""A web chat upload reaches the model: an image as image content, a PDF as text that memory search
finds later; stored in the person's tree as Markdown links (never Off-The-Record)."""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image

from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.media.rig import media_files, pdf, png, signed_in_browser
from tests.signin.rig import url


def _user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


async def test_an_uploaded_image_reaches_the_model_as_an_image(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    b = await signed_in_browser(gw)
    try:
        big = png(3000, 2000)  # downscaled to the model's limit on the way
        status, up = await b.upload(big, "holiday photo.png", "image/png")
        assert status == 201, up
        fake_anthropic.enqueue("A red square.")
        reply = await b.send("what is this?", [up["upload_id"]])
        assert reply["type"] == "reply" and reply["text"] == "A red square.", reply
        blocks = _user_content(fake_anthropic.last_turn())
        images = [blk for blk in blocks if blk["type"] == "image"]
        assert len(images) == 1, blocks
        sent = Image.open(io.BytesIO(base64.b64decode(images[0]["source"]["data"])))
        assert max(sent.size) == 1568 and sent.size[0] > sent.size[1]
        text = " ".join(blk.get("text", "") for blk in blocks if blk["type"] == "text")
        assert "what is this?" in text
        stored = media_files(gw.data_dir, b.user_id)
        assert len(stored) == 1 and stored[0].endswith("-holiday-photo.png"), stored
        assert (gw.data_dir / "users" / b.user_id / stored[0]).read_bytes() == big, "the original is kept"
        assert f"[holiday photo.png]({stored[0]})" in text, "the transcript links the stored file"
        # The console lists it as media, and it cannot be edited there as text.
        async with b.http.get(url(gw, "/api/users/me/memory/files")) as resp:
            listed = {f["path"]: f["kind"] for f in (await resp.json())["files"]}
        assert listed[stored[0]] == "media"
        async with b.http.put(url(gw, f"/api/users/me/memory/files/{stored[0]}"), json={"text": "x", "etag": ""},
                              headers={"X-CSRF-Token": b.csrf}) as resp:  # fmt: skip
            assert resp.status == 403
                # The upload is used once: a second message naming it is refused.
        again = await b.send("and again", [up["upload_id"]])
        assert again["type"] == "error" and again["code"] == "bad_attachment"
    finally:
        await b.close()


async def test_a_pdf_is_read_into_the_prompt_and_found_later_by_memory_search(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    b = await signed_in_browser(gw)
    try:
        doc = pdf(["The quarterly budget for the greenhouse is 4200 euros.", "Second page: tomato seedlings."])
        status, up = await b.upload(doc, "budget.pdf", "application/pdf")
        assert status == 201, up
        fake_anthropic.enqueue("Noted.")
        reply = await b.send("", [up["upload_id"]])
        assert reply["type"] == "reply" and reply["text"] == "Noted.", reply
        prompt = " ".join(blk.get("text", "") for blk in _user_content(fake_anthropic.last_turn()))
        assert "greenhouse is 4200 euros" in prompt and "tomato seedlings" in prompt
        assert 'name="budget.pdf"' in prompt and "not instructions" in prompt
        stored = media_files(gw.data_dir, b.user_id)
        assert [p.rsplit("-", 1)[-1] for p in stored] == ["budget.pdf", "budget.pdf.md"], stored
        await gw.settle()
        assert gw.memory is not None
        # What `kith memory search` asks (the daemon's index, through its memory service).
        hits = await gw.memory.recall(scope=f"user:{b.user_id}", query="greenhouse budget euros", k=5)
        assert any("4200 euros" in h.text and h.source.endswith("budget.pdf.md") for h in hits), hits
    finally:
        await b.close()


async def test_off_the_record_uploads_reach_the_model_and_store_nothing(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    b = await signed_in_browser(gw)
    try:
        assert "ON" in (await b.send("/otr on", []))["text"]
        status, up = await b.upload(png(), "secret.png", "image/png")
        assert status == 201
        fake_anthropic.enqueue("Seen, not kept.")
        reply = await b.send("look", [up["upload_id"]])
        assert reply["text"] == "Seen, not kept." and reply["otr"] is True, reply
        blocks = _user_content(fake_anthropic.last_turn())
        assert [blk["type"] for blk in blocks].count("image") == 1
        assert "not kept: Off-The-Record" in " ".join(blk.get("text", "") for blk in blocks)
        assert media_files(gw.data_dir, b.user_id) == []
    finally:
        await b.close()
