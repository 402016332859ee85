"""Files of a /v1 message travel inline (data: URLs): parsed into attachments, decoded with the media
limit, never fetched from a URL."""

from __future__ import annotations

import base64

import pytest

from adapters.openai_wire import WireError, inline_bytes, parse_chat
from gateway.media.errors import AttachmentUnavailable, TooLarge
from tests.openai_compat.conftest import Start


def _body(*parts: dict[str, object]) -> dict[str, object]:
    return {"model": "kith", "messages": [{"role": "user", "content": list(parts)}]}


def test_parts_become_attachments() -> None:
    pdf = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 hello").decode()
    wav = base64.b64encode(b"RIFF....WAVE").decode()
    req = parse_chat(_body({"type": "file", "file": {"file_data": pdf, "filename": "notes.pdf"}},
                           {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}},
                           {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=",
                                                               "detail": "auto"}}))  # fmt: skip
    assert req.text == ""
    assert [(a.kind, a.name, a.mime_type) for a in req.attachments] == [
        ("document", "notes.pdf", "application/pdf"), ("voice", "audio.wav", "audio/wav"), ("photo", "", "image/png")]
    assert inline_bytes(req.attachments[0].url, 1000) == b"%PDF-1.4 hello"


@pytest.mark.parametrize("url", ["https://example.org/cat.png", "file:///etc/passwd", "data:image/png,rawtext", 42])
def test_anything_but_inline_base64_is_refused(url: object) -> None:
    with pytest.raises(WireError) as caught:
        parse_chat(_body({"type": "image_url", "image_url": {"url": url}}))
    assert caught.value.status == 400 and "data: URLs" in str(caught.value)


def test_too_many_files_are_refused() -> None:
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with pytest.raises(WireError):
        parse_chat(_body(*[part] * 11))


def test_decoding_stops_past_the_limit() -> None:
    big = "data:application/octet-stream;base64," + base64.b64encode(b"x" * 100_000).decode()
    data = inline_bytes(big, 1000)
    assert data is not None and 1000 < len(data) < 1100  # enough to know it is over, not the whole file
    assert inline_bytes("data:image/png;base64,@@not base64@@", 1000) is None


async def test_the_adapter_hands_the_media_pipeline_the_bytes_or_a_clear_refusal(start: Start) -> None:
    from gateway.types import Attachment

    gw = await start()
    adapter = gw.adapters["openai"]
    ok = Attachment(kind="photo", url="data:image/png;base64," + base64.b64encode(b"12345").decode())
    assert await adapter.fetch_attachment(ok, max_bytes=10) == b"12345"
    with pytest.raises(TooLarge):
        await adapter.fetch_attachment(ok, max_bytes=3)
    with pytest.raises(AttachmentUnavailable):
        await adapter.fetch_attachment(Attachment(kind="photo", url="data:image/png;base64,!!!!"), max_bytes=10)
