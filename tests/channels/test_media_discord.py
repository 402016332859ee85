"""Discord media in: attachments on MESSAGE_CREATE become ``Attachment`` values (through discord.py's
own parsing) and are fetched from the CDN (the fake serves signed URLs), never from another host."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.discord import DiscordAdapter
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.types import Attachment
from tests.channels.stub import StubGateway
from tests.fakes.discord_api import FakeDiscord

TOKEN = "discord-token"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20
PDF = b"%PDF-1.4\n" + b"1" * 4000 + b"\n%%EOF\n"
OGG = b"OggS" + b"\x02" * 2000
MB = 1024 * 1024
ADA = 111
DM_CHANNEL = ADA + 1  # the fake's DM channel for a user


@pytest.fixture
async def discord_rig(tmp_path) -> AsyncIterator[tuple[FakeDiscord, StubGateway, DiscordAdapter]]:  # type: ignore[no-untyped-def]
    async with FakeDiscord(token=TOKEN) as fake, StubGateway.with_channels(tmp_path, discord={
            "enabled": True, "token": TOKEN, "api_base": fake.api_base, "gateway_url": fake.gateway_url,
            "send_rate_per_s": 1000, "send_burst": 1000}) as gw:
        adapter = DiscordAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await fake.wait_ready()
        yield fake, gw, adapter


async def test_image_without_text_is_a_turn_and_fetches(discord_rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = discord_rig
    att = fake.attachment(PNG, filename="cat.png", content_type="image/png", channel_id=DM_CHANNEL,
                          width=64, height=64)
    await fake.say(user_id=ADA, content="", attachments=[att])
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == ""
    (a,) = msg.attachments
    assert (a.kind, a.name, a.mime_type, a.size) == ("photo", "cat.png", "image/png", len(PNG))
    assert a.platform_id == att["id"]
    assert a.url == att["url"]
    assert await adapter.fetch_attachment(a, max_bytes=MB) == PNG
    assert len(fake.cdn_requests) == 1


async def test_pdf_with_text_and_a_voice_message(discord_rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = discord_rig
    pdf = fake.attachment(PDF, filename="notes.pdf", content_type="application/pdf", channel_id=DM_CHANNEL)
    voice = fake.attachment(OGG, filename="voice-message.ogg", content_type="audio/ogg", channel_id=DM_CHANNEL,
                            duration_secs=2.5, waveform="AAAA")
    await fake.say(user_id=ADA, content="summarise please", attachments=[pdf])
    await fake.say(user_id=ADA, content="", attachments=[voice], flags=8192)
    first, second = await gw.wait_inbound(2)
    assert first.text == "summarise please"
    assert [(a.kind, a.mime_type) for a in first.attachments] == [("document", "application/pdf")]
    assert [(a.kind, a.name) for a in second.attachments] == [("voice", "voice-message.ogg")]
    assert await adapter.fetch_attachment(first.attachments[0], max_bytes=MB) == PDF
    assert await adapter.fetch_attachment(second.attachments[0], max_bytes=MB) == OGG


async def test_oversize_refused_by_declared_size_and_by_the_body(discord_rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = discord_rig
    big = fake.attachment(PDF, filename="big.pdf", content_type="application/pdf", channel_id=DM_CHANNEL)
    liar = fake.attachment(b"z" * 300_000, filename="liar.txt", content_type="text/plain", channel_id=DM_CHANNEL,
                           declared_size=10, chunked=True)
    await fake.say(user_id=ADA, content="two files", attachments=[big, liar])
    (msg,) = await gw.wait_inbound(1)
    with pytest.raises(TooLarge, match=r"big\.pdf"):
        await adapter.fetch_attachment(msg.attachments[0], max_bytes=1000)
    assert fake.cdn_requests == []  # refused on the declared size alone
    with pytest.raises(TooLarge):
        await adapter.fetch_attachment(msg.attachments[1], max_bytes=100_000)
    assert len(fake.cdn_requests) == 1


async def test_urls_outside_the_cdn_are_never_fetched(discord_rig) -> None:  # type: ignore[no-untyped-def]
    _fake, _gw, adapter = discord_rig
    async with FakeDiscord(token=TOKEN) as elsewhere:
        planted = elsewhere.attachment(PNG, filename="x.png", content_type="image/png", channel_id=1)
        for url in (planted["url"], "http://169.254.169.254/latest/meta-data/", "file:///etc/passwd",
                    "https://cdn.discordapp.com.evil.example/a.png", "https://user:pw@cdn.discordapp.com/a.png"):
            with pytest.raises(AttachmentUnavailable, match="not on Discord's CDN"):
                await adapter.fetch_attachment(Attachment(kind="photo", name="x.png", url=url), max_bytes=MB)
        assert elsewhere.cdn_requests == []
    assert adapter.cdn_allowed("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1&is=2&hm=3")
    assert adapter.cdn_allowed("https://media.discordapp.net/attachments/1/2/a.png")


async def test_an_expired_link_is_unavailable(discord_rig) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter = discord_rig
    att = fake.attachment(PNG, filename="old.png", content_type="image/png", channel_id=DM_CHANNEL)
    stale = att["url"].split("?")[0] + "?ex=1&is=0&hm=00"  # the signature no longer matches
    with pytest.raises(AttachmentUnavailable, match="404"):
        await adapter.fetch_attachment(Attachment(kind="photo", name="old.png", url=stale), max_bytes=MB)
