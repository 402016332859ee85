"""Bad files get one clear reply, the model is not called and nothing is stored: oversize, a type
kith does not read (whatever it claims to be), a corrupt or encrypted PDF, a decompression bomb, a
10,000-page document, an upload that is not the sender's."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from pypdf import PdfWriter

from gateway.app import Gateway
from gateway.media.limits import LIMITS, MediaLimits
from gateway.testing import GatewayFactory
from tests.media.rig import Browser, media_files, pdf, png, signed_in_browser


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` pixels (a bomb's shape; its data is tiny)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = chunk(b"IDAT", zlib.compress(b"\x00" * 64))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + idat + chunk(b"IEND", b"")


def many_pages(n: int) -> bytes:
    writer = PdfWriter()
    for _ in range(n):
        writer.add_blank_page(width=200, height=200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def _refused(gw: Gateway, b: Browser, data: bytes, name: str, content_type: str) -> str:
    status, up = await b.upload(data, name, content_type)
    assert status == 201, up
    reply = await b.send("please read this", [up["upload_id"]])
    assert reply["type"] == "reply" and reply["notice"] is True, reply
    assert reply["text"].startswith("I could not take that file in: "), reply
    assert "not sent to the model" in reply["text"]
    assert media_files(gw.data_dir, b.user_id) == [], "nothing half-stored"
    return str(reply["text"])


@pytest.fixture
async def browser_gw(make_gateway: GatewayFactory) -> tuple[Gateway, Browser]:
    gw = await make_gateway()
    b = await signed_in_browser(gw)
    yield gw, b  # type: ignore[misc]
    await b.close()


async def test_a_file_that_only_claims_to_be_an_image_is_refused(browser_gw: tuple[Gateway, Browser]) -> None:
    gw, b = browser_gw
    text = await _refused(gw, b, b"MZ\x90\x00" + bytes(range(256)) * 4, "cat.png", "image/png")
    assert "cat.png is not a kind of file I read (it says image/png)" in text and "PDF" in text


async def test_a_corrupt_pdf_is_refused(browser_gw: tuple[Gateway, Browser]) -> None:
    gw, b = browser_gw
    text = await _refused(gw, b, b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >>\ntrailer <<>>\n%%EOF",
                          "broken.pdf", "application/pdf")  # fmt: skip
    assert "broken.pdf: the PDF is damaged" in text


async def test_an_encrypted_pdf_is_refused(browser_gw: tuple[Gateway, Browser]) -> None:
    gw, b = browser_gw
    text = await _refused(gw, b, pdf(["the secret plan"], password="hunter2"), "locked.pdf", "application/pdf")
    assert "locked.pdf: the PDF is encrypted" in text


async def test_a_ten_thousand_page_pdf_is_refused_without_reading_it(browser_gw: tuple[Gateway, Browser]) -> None:
    gw, b = browser_gw
    text = await _refused(gw, b, many_pages(10_000), "huge.pdf", "application/pdf")
    assert "huge.pdf: the PDF has 10,000 pages; kith reads at most 200" in text


@pytest.mark.parametrize("width,height", [(10_000, 5_000), (40_000, 40_000)])
async def test_a_decompression_bomb_is_refused_from_its_header(
    browser_gw: tuple[Gateway, Browser], width: int, height: int
) -> None:
    # 50 Mpx is over kith's cap; 1.6 Gpx is over Pillow's own bomb limit too: both are refused
    # before a pixel is decoded (decoding the second would take gigabytes).
    gw, b = browser_gw
    text = await _refused(gw, b, png_header(width, height), "bomb.png", "image/png")
    assert "bomb.png" in text and "pixels" in text


async def test_oversize_files_are_refused_at_upload_and_at_use(browser_gw: tuple[Gateway, Browser]) -> None:
    gw, b = browser_gw
    gw.stash[LIMITS] = MediaLimits(max_bytes=50_000)
    status, answer = await b.upload(b"x" * 60_000, "big.txt", "text/plain")
    assert status == 413 and answer["error"] == "too_large" and "50,000" in answer["message"]
    status, up = await b.upload(png(400, 400), "ok.png", "image/png")  # under the cap when uploaded...
    assert status == 201
    gw.stash[LIMITS] = MediaLimits(max_bytes=100)  # ...over it when the message uses it
    reply = await b.send("", [up["upload_id"]])
    assert reply["notice"] and "ok.png is" in reply["text"] and "the limit is 100 bytes" in reply["text"]
    assert media_files(gw.data_dir, b.user_id) == []


async def test_a_message_names_only_its_own_uploads(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    alice = await signed_in_browser(gw, "alice-laptop")
    bob = await signed_in_browser(gw, "bob-laptop")
    try:
        status, up = await alice.upload(png(), "mine.png", "image/png")
        assert status == 201
        stolen = await bob.send("look", [up["upload_id"]])
        assert stolen["type"] == "error" and stolen["code"] == "bad_attachment"
        assert "unknown upload" in stolen["message"]
        assert media_files(gw.data_dir, bob.user_id) == []
        ok = await alice.send("look", [up["upload_id"]])
        assert ok["type"] == "reply" and not ok["notice"], ok
    finally:
        await alice.close()
        await bob.close()


async def test_uploads_need_a_signed_in_person_and_the_csrf_token(browser_gw: tuple[Gateway, Browser]) -> None:
    gw, b = browser_gw
    from tests.signin.rig import browser, url

    async with browser() as nobody, nobody.post(url(gw, "/api/uploads"), data=png(),
                                                 headers={"Content-Type": "image/png"}) as resp:  # fmt: skip
        assert resp.status == 401
    async with b.http.post(url(gw, "/api/uploads"), data=png(), headers={"Content-Type": "image/png"}) as resp:
        assert resp.status == 403, "a cookie without the CSRF token changes nothing"
    from gateway.http.auth import OPERATOR_TOKEN

    operator = {"Content-Type": "image/png", "Authorization": f"Bearer {gw.http_app[OPERATOR_TOKEN]}"}
    async with browser() as script, script.post(url(gw, "/api/uploads"), data=png(), headers=operator) as resp:
        assert resp.status == 403 and "person" in (await resp.json())["message"], "uploads belong to a person"


async def test_a_store_that_fails_halfway_takes_back_what_the_message_wrote(make_gateway: GatewayFactory) -> None:
    # The image is written first; the document's text is then over the memory store's per-file cap,
    # so its write fails and the image already stored is removed again.
    gw = await make_gateway(memory={"max_file_bytes": 4096})
    b = await signed_in_browser(gw)
    try:
        status, photo = await b.upload(png(), "first.png", "image/png")
        assert status == 201
        status, notes = await b.upload(("long notes line\n" * 1000).encode(), "notes.txt", "text/plain")
        assert status == 201
        reply = await b.send("both", [photo["upload_id"], notes["upload_id"]])
        assert reply["notice"] and "could not be stored" in reply["text"] and "nothing was kept" in reply["text"]
        assert media_files(gw.data_dir, b.user_id) == []
        audit = (gw.data_dir / "users" / b.user_id / ".audit.jsonl").read_text()
        assert '"op": "delete"' in audit and "first.png" in audit, "the undo is audited like the write"
    finally:
        await b.close()
