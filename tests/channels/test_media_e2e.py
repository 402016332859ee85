"""Media in, end to end: a real Gateway (with the media plugin) and the three platform fakes; the model
is the Anthropic fake driven through the real SDK, so what the model was sent is checked on the wire."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from tests.channels.rig import ADA_DC, ADA_ROOM, ADA_TG, start_rig
from tests.fakes.anthropic import API_KEY, FakeAnthropic
from tests.fakes.openai_server import API_KEY as OPENAI_KEY
from tests.fakes.openai_server import FakeOpenAI


def jpeg(width: int = 80, height: int = 60) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (20, 120, 200)).save(out, format="JPEG")
    return out.getvalue()


def pdf_with(text: str) -> bytes:
    """A one-page PDF whose page shows ``text`` in Helvetica (what pypdf reads back)."""
    writer = PdfWriter()
    page = writer.add_blank_page(width=595, height=842)
    helvetica = DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                  NameObject("/Subtype"): NameObject("/Type1"),
                                  NameObject("/BaseFont"): NameObject("/Helvetica")})
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(helvetica)})})
    content = DecodedStreamObject()
    content.set_data(f"BT /F1 11 Tf 60 780 Td ({text}) Tj ET".encode("latin-1"))
    page[NameObject("/Contents")] = writer._add_object(content)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def last_user_content(fake: FakeAnthropic) -> list[dict[str, Any]]:
    message = fake.last_turn()["messages"][-1]
    assert message["role"] == "user"
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


async def test_telegram_photo_without_caption_reaches_the_model_as_an_image(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm)
    try:
        photo = jpeg()
        await rig.tg.push(rig.tg.make_update(user_id=ADA_TG, photo=rig.tg.photo(photo, width=80, height=60)))
        (sent,) = await rig.tg.wait_sent(1)
        assert sent.chat_id == ADA_TG
        blocks = last_user_content(fake)
        images = [b for b in blocks if b["type"] == "image"]
        assert len(images) == 1 and images[0]["source"]["media_type"] in ("image/jpeg", "image/png")
        sent_image = Image.open(io.BytesIO(base64.b64decode(images[0]["source"]["data"])))
        assert sent_image.size == (80, 60)  # within limits: sent as it came
        assert len(rig.tg.downloads) == 1  # only the largest size was fetched
        assert rig.turns("telegram") == 1
    finally:
        await rig.stop()
        await fake.stop()


async def test_discord_pdf_text_is_in_the_prompt(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm)
    try:
        doc = pdf_with("The meeting moved to Thursday at the Periwinkle room.")
        dm_channel = ADA_DC + 1
        att = rig.dc.attachment(doc, filename="agenda.pdf", content_type="application/pdf", channel_id=dm_channel)
        await rig.dc_say("what does this say?", attachments=[att])
        await rig.dc.wait_created(1)
        prompt = json.dumps(last_user_content(fake))
        assert "Periwinkle room" in prompt and "what does this say?" in prompt
        assert len(rig.dc.cdn_requests) == 1
        # Stored in Ada's tree with its text beside it, so memory search finds it later.
        (user_id,) = {r["user_id"] for r in rig.select_rows("SELECT user_id FROM identities")}
        await rig.gw.settle()
        assert rig.gw.memory is not None
        hits = await rig.gw.memory.recall(scope=f"user:{user_id}", query="meeting Thursday Periwinkle", k=5)
        assert any("Periwinkle room" in h.text and h.source.endswith("agenda.pdf.md") for h in hits), hits
    finally:
        await rig.stop()
        await fake.stop()


async def test_nextcloud_share_without_credentials_gets_a_clear_reply(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm)
    try:
        params = rig.nc.share_file(jpeg(), name="whiteboard.jpg", mimetype="image/jpeg")
        assert await rig.nc_say("{file}", room=ADA_ROOM, parameters=params, event="Activity",
                                note_name="file_shared") == 200
        (post,) = await rig.nc.wait_posts(1)
        assert "api_user" in post.message and "whiteboard.jpg" in post.message
        assert fake.turn_requests() == [] and rig.nc.dav_requests == []
    finally:
        await rig.stop()
        await fake.stop()


async def test_nextcloud_shared_image_reaches_the_model(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm, nextcloud={"api_user": "kithbot", "api_password": "app-password"})
    try:
        params = rig.nc.share_file(jpeg(40, 30), name="whiteboard.jpg", mimetype="image/jpeg")
        # With a caption, Talk's message is the caption; the file is still a parameter.
        assert await rig.nc_say("what is on it?", room=ADA_ROOM, parameters=params, event="Activity",
                                note_name="file_shared") == 200
        await rig.nc.wait_posts(1)
        blocks = last_user_content(fake)
        assert [b["type"] for b in blocks].count("image") == 1
        assert "what is on it?" in json.dumps(blocks)
        assert [m for m, _ in rig.nc.dav_requests] == ["SEARCH", "GET"]
    finally:
        await rig.stop()
        await fake.stop()


async def test_telegram_voice_note_transcript_is_the_turn(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    speech = FakeOpenAI()
    await speech.start()
    speech.transcript_text = "remind me to water the ferns"
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0,
           "roles": {"transcription": {"provider": "openai", "model": "whisper-1", "base_url": speech.url,
                                       "api_key": OPENAI_KEY}}}
    rig = await start_rig(tmp_path, llm=llm)
    try:
        voice = b"OggS\x00\x02" + bytes(200)  # an Ogg page header is what the type check reads
        await rig.tg.push(rig.tg.make_update(user_id=ADA_TG, voice=rig.tg.voice(voice)))
        await rig.tg.wait_sent(1, timeout=30)  # download, transcription and the turn: slow on a loaded machine
        (upload,) = speech.transcriptions
        assert upload["data"] == voice and upload["filename"].endswith(".ogg")
        prompt = json.dumps(last_user_content(fake))
        assert "remind me to water the ferns" in prompt
    finally:
        await rig.stop()
        await fake.stop()
        await speech.close()
