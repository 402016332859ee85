"""Telegram media in: photos, documents and voice notes arrive as attachments and are fetched through
the Bot API's getFile + /file/bot<token>/<path> (the fake speaks both), with the size caps enforced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapters.telegram import TelegramAdapter
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.types import Attachment
from tests.channels.stub import StubGateway
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "123456:TEST-token"
PHOTO = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40 + b"\xff\xd9"
PDF = b"%PDF-1.4\n" + b"0" * 5000 + b"\n%%EOF\n"
VOICE = b"OggS" + b"\x01" * 3000
MB = 1024 * 1024


@pytest.fixture
async def telegram(tmp_path) -> AsyncIterator[tuple[FakeTelegram, StubGateway, TelegramAdapter]]:  # type: ignore[no-untyped-def]
    async with FakeTelegram(token=TOKEN) as fake, StubGateway.with_channels(tmp_path, telegram={
            "enabled": True, "token": TOKEN, "base_url": fake.base_url, "poll_timeout_s": 1,
            "send_rate_per_s": 1000, "send_burst": 1000}) as gw:
        adapter = TelegramAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        yield fake, gw, adapter


async def test_captionless_photo_is_a_turn_carrying_the_largest_size(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = telegram
    sizes = fake.photo(PHOTO)
    await fake.push(fake.make_update(user_id=42, photo=sizes))
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "" and len(msg.attachments) == 1
    (att,) = msg.attachments
    best = sizes[-1]
    assert (att.kind, att.mime_type, att.size, att.platform_id) == ("photo", "image/jpeg", len(PHOTO), best["file_id"])
    assert att.name == f"photo_{best['file_unique_id']}.jpg"
    assert msg.raw["file_unique_ids"] == (best["file_unique_id"],)
    data = await adapter.fetch_attachment(att, max_bytes=MB)
    assert data == PHOTO
    assert fake.calls.count("getFile") == 1 and fake.downloads == [fake.files[best["file_id"]].path]


async def test_document_with_caption_and_voice_note(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = telegram
    await fake.push(fake.make_update(user_id=42, caption="read this",
                                     document=fake.document(PDF, name="report.pdf", mime_type="application/pdf")))
    await fake.push(fake.make_update(user_id=42, voice=fake.voice(VOICE)))
    doc_msg, voice_msg = await gw.wait_inbound(2)
    assert doc_msg.text == "read this"
    (doc,) = doc_msg.attachments
    assert (doc.kind, doc.name, doc.mime_type, doc.size) == ("document", "report.pdf", "application/pdf", len(PDF))
    (voice,) = voice_msg.attachments
    assert voice_msg.text == "" and (voice.kind, voice.mime_type) == ("voice", "audio/ogg")
    assert voice.name.startswith("voice_") and voice.name.endswith(".ogg")
    assert await adapter.fetch_attachment(doc, max_bytes=MB) == PDF
    assert await adapter.fetch_attachment(voice, max_bytes=MB) == VOICE


async def test_oversize_is_refused_before_download(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = telegram
    doc = fake.document(PDF, name="big.pdf", mime_type="application/pdf")
    await fake.push(fake.make_update(user_id=42, document=doc))
    (msg,) = await gw.wait_inbound(1)
    with pytest.raises(TooLarge, match=r"big.pdf"):
        await adapter.fetch_attachment(msg.attachments[0], max_bytes=1000)
    assert "getFile" not in fake.calls and fake.downloads == []  # the declared size was enough


async def test_a_file_over_the_bot_api_limit_is_refused_with_the_reason(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = telegram
    huge = fake.document(b"x", name="film.mkv", mime_type="video/x-matroska", declared_size=25 * MB)
    await fake.push(fake.make_update(user_id=42, document=huge))
    (msg,) = await gw.wait_inbound(1)
    with pytest.raises(TooLarge, match=r"at most 20.0 MB"):
        await adapter.fetch_attachment(msg.attachments[0], max_bytes=100 * MB)
    assert "getFile" not in fake.calls
    # The message may understate the size (forwarded files do); getFile's own refusal is mapped too.
    understated = Attachment(kind="document", name="film.mkv", platform_id=huge["file_id"])
    with pytest.raises(TooLarge, match=r"20.0 MB"):
        await adapter.fetch_attachment(understated, max_bytes=100 * MB)


async def test_a_body_longer_than_declared_is_cut_at_the_cap(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = telegram
    # Declared 100 bytes, served 300 KB without Content-Length: only the streamed count can tell.
    doc = fake.document(b"y" * 300_000, name="liar.txt", mime_type="text/plain", declared_size=100, chunked=True)
    await fake.push(fake.make_update(user_id=42, document=doc))
    (msg,) = await gw.wait_inbound(1)
    with pytest.raises(TooLarge):
        await adapter.fetch_attachment(msg.attachments[0], max_bytes=100_000)
    assert len(fake.downloads) == 1


async def test_an_unknown_file_id_is_unavailable(telegram) -> None:  # type: ignore[no-untyped-def]
    _fake, _gw, adapter = telegram
    with pytest.raises(AttachmentUnavailable, match=r"(?i)invalid file_id"):
        await adapter.fetch_attachment(Attachment(kind="photo", platform_id="AgACnope"), max_bytes=MB)


async def test_an_album_is_one_turn_with_every_item(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = telegram
    shots = [PHOTO + bytes([i]) for i in range(3)]
    parts = [fake.make_update(user_id=42, media_group_id="13579", photo=fake.photo(shot)) for shot in shots]
    parts[0]["message"]["caption"] = "our trip"  # Telegram puts an album's caption on one part
    await fake.push(*parts)
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "our trip" and [a.kind for a in msg.attachments] == ["photo"] * 3
    assert msg.message_id == f"42:{parts[0]['message']['message_id']}"
    assert len(msg.raw["album_message_ids"]) == 3 and len(msg.raw["file_unique_ids"]) == 3
    assert [await adapter.fetch_attachment(a, max_bytes=MB) for a in msg.attachments] == shots
    (sent,) = await fake.wait_sent(1)  # one reply for the album
    assert sent.text.startswith("echo: our trip")


async def test_a_file_path_climbing_out_of_the_file_root_is_not_fetched(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter = telegram
    planted = fake.add_file(PDF, folder="../../bot123/getMe?x=")  # a Bot API answer we must not follow
    with pytest.raises(AttachmentUnavailable, match="no download path"):
        await adapter.fetch_attachment(Attachment(kind="document", platform_id=planted["file_id"]), max_bytes=MB)
    assert fake.downloads == [] and "getFile" in fake.calls
