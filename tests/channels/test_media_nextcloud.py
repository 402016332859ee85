"""Nextcloud Talk media in: a file shared into a room arrives as the ``{file}`` rich object and is
fetched over WebDAV (SEARCH by file id in the API user's tree, then GET) from the configured server,
with the app credentials; without them the file is reported as unavailable with what to set."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from adapters.nextcloud_talk import NextcloudTalkAdapter
from gateway.configread import parse_config
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.types import Attachment
from tests.channels.stub import StubGateway
from tests.fakes.nextcloud import FakeNextcloud

SECRET = "n" * 64
HOOK = "/nextcloud/webhook"
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 30 + b"\xff\xd9"
PDF = b"%PDF-1.4\n" + b"2" * 3000 + b"\n%%EOF\n"
OGG = b"OggS" + b"\x03" * 1500
MB = 1024 * 1024


@dataclass
class Rig:
    fake: FakeNextcloud
    adapter: NextcloudTalkAdapter
    gw: StubGateway
    client: TestClient[web.Request, web.Application]

    async def share(self, data: bytes, *, name: str, mimetype: str, text: str = "{file}", event: str = "Activity",
                    **kw: object) -> None:
        """Share a file into the room as current Talk tells bots: an Activity named ``file_shared``
        (``event="Create"``: the chat-message form older servers used)."""
        params = self.fake.share_file(data, name=name, mimetype=mimetype, **kw)  # type: ignore[arg-type]
        note = "file_shared" if event == "Activity" else "message"
        assert await self.fake.say(self.client, room="dmroom", user="ada", text=text, url=HOOK, parameters=params,
                                   event=event, note_name=note) == 200


@pytest.fixture
async def rig(tmp_path) -> AsyncIterator[Rig]:  # type: ignore[no-untyped-def]
    async with FakeNextcloud(secret=SECRET, room_types={"dmroom": 1}) as fake, StubGateway.with_channels(
        tmp_path,
        nextcloud={"enabled": True, "base_url": fake.base_url, "bot_secret": SECRET, "api_user": "kithbot",
                   "api_password": "app-password", "send_rate_per_s": 1000, "send_burst": 1000},
    ) as gw:
        adapter = NextcloudTalkAdapter(gw)  # type: ignore[arg-type]
        client = await gw.mount(adapter)
        gw.start(adapter)
        yield Rig(fake, adapter, gw, client)


async def test_a_shared_photo_is_a_turn_and_is_fetched_over_webdav(rig: Rig) -> None:
    await rig.share(JPEG, name="IMG_0042.jpg", mimetype="image/jpeg")
    (msg,) = await rig.gw.wait_inbound(1)
    assert msg.text == ""  # the message was only "{file}": no text, one attachment
    (att,) = msg.attachments
    assert (att.kind, att.name, att.mime_type, att.size) == ("photo", "IMG_0042.jpg", "image/jpeg", len(JPEG))
    assert att.platform_id.isdigit() and "/index.php/s/" in att.url
    assert await rig.adapter.fetch_attachment(att, max_bytes=MB) == JPEG
    assert rig.fake.dav_requests == [("SEARCH", "/remote.php/dav/"),
                                     ("GET", "/remote.php/dav/files/kithbot/Talk/IMG_0042.jpg")]


async def test_documents_and_audio_keep_their_type_and_text(rig: Rig) -> None:
    await rig.share(PDF, name="Q3 report.pdf", mimetype="application/pdf", text="for tomorrow")  # a caption
    await rig.share(OGG, name="Talk recording.ogg", mimetype="audio/ogg", event="Create")
    (msg,) = await rig.gw.wait_inbound(1)  # shared together: one turn
    assert msg.text == "for tomorrow"
    pdf, ogg = msg.attachments
    assert (pdf.kind, pdf.name) == ("document", "Q3 report.pdf")
    assert (ogg.kind, ogg.mime_type) == ("audio", "audio/ogg")
    assert await rig.adapter.fetch_attachment(pdf, max_bytes=MB) == PDF  # a space in the path
    assert await rig.adapter.fetch_attachment(ogg, max_bytes=MB) == OGG


async def test_oversize_is_refused_declared_or_streamed(rig: Rig) -> None:
    await rig.share(PDF, name="big.pdf", mimetype="application/pdf")
    await rig.share(b"q" * 300_000, name="liar.txt", mimetype="text/plain", declared_size=10, chunked=True)
    (msg,) = await rig.gw.wait_inbound(1)
    big, liar = msg.attachments
    with pytest.raises(TooLarge, match=r"big\.pdf"):
        await rig.adapter.fetch_attachment(big, max_bytes=1000)
    assert rig.fake.dav_requests == []
    with pytest.raises(TooLarge):
        await rig.adapter.fetch_attachment(liar, max_bytes=100_000)
    assert [m for m, _ in rig.fake.dav_requests] == ["SEARCH", "GET"]


async def test_a_file_the_api_user_cannot_see_is_unavailable(rig: Rig) -> None:
    await rig.share(PDF, name="private.pdf", mimetype="application/pdf", shared_with=())
    (msg,) = await rig.gw.wait_inbound(1)
    with pytest.raises(AttachmentUnavailable, match="not visible to the Nextcloud user 'kithbot'"):
        await rig.adapter.fetch_attachment(msg.attachments[0], max_bytes=MB)
    assert [m for m, _ in rig.fake.dav_requests] == ["SEARCH"]


async def test_a_wrong_app_password_is_reported(rig: Rig) -> None:
    rig.fake.api_credentials = ("kithbot", "rotated")
    await rig.share(JPEG, name="a.jpg", mimetype="image/jpeg", shared_with=("kithbot",))
    (msg,) = await rig.gw.wait_inbound(1)
    with pytest.raises(AttachmentUnavailable, match="refused the configured app password"):
        await rig.adapter.fetch_attachment(msg.attachments[0], max_bytes=MB)


async def test_without_app_credentials_the_file_cannot_be_fetched(tmp_path, rig: Rig) -> None:  # type: ignore[no-untyped-def]
    cfg = parse_config({"data_dir": str(tmp_path), "channels": {"nextcloud": {
        "enabled": True, "base_url": rig.fake.base_url, "bot_secret": SECRET}}}, env={})
    bare = NextcloudTalkAdapter(StubGateway(cfg))  # type: ignore[arg-type]
    att = Attachment(kind="photo", name="a.jpg", mime_type="image/jpeg", size=10, platform_id="50000")
    with pytest.raises(AttachmentUnavailable, match="api_user and api_password"):
        await bare.fetch_attachment(att, max_bytes=MB)
    assert rig.fake.dav_requests == []


def test_basic_auth_header_is_the_configured_pair(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = parse_config({"data_dir": str(tmp_path), "channels": {"nextcloud": {
        "enabled": True, "base_url": "https://cloud.example", "bot_secret": SECRET, "api_user": "kith bot",
        "api_password": "p:w"}}}, env={})
    adapter = NextcloudTalkAdapter(StubGateway(cfg))  # type: ignore[arg-type]
    assert adapter._basic_auth() == "Basic " + base64.b64encode(b"kith bot:p:w").decode()


async def test_a_search_answer_pointing_outside_the_users_tree_is_not_followed(rig: Rig) -> None:
    await rig.share(PDF, name="x.pdf", mimetype="application/pdf", shared_with=())
    (msg,) = await rig.gw.wait_inbound(1)
    stored = rig.fake.trees["ada"]["Documents/x.pdf"]
    rig.fake.trees["kithbot"] = {"../ada/Documents/x.pdf": stored}  # a server answer climbing out of the tree
    with pytest.raises(AttachmentUnavailable, match="not visible"):
        await rig.adapter.fetch_attachment(msg.attachments[0], max_bytes=MB)
    assert [m for m, _ in rig.fake.dav_requests] == ["SEARCH"]


async def test_other_system_messages_are_not_turns(rig: Rig) -> None:
    for name in ("conversation_renamed", "call_ended", "user_added"):
        status = await rig.fake.say(rig.client, room="dmroom", user="ada", text="{actor} renamed the conversation",
                                    url=HOOK, event="Activity", note_name=name)
        assert status == 200
    await rig.share(JPEG, name="after.jpg", mimetype="image/jpeg")
    (msg,) = await rig.gw.wait_inbound(1)  # only the share became a turn
    assert [a.name for a in msg.attachments] == ["after.jpg"]


async def test_files_shared_together_and_the_words_after_them_are_one_turn(rig: Rig) -> None:
    await rig.share(JPEG, name="before.jpg", mimetype="image/jpeg")
    await rig.share(JPEG + b"2", name="after.jpg", mimetype="image/jpeg", text="which looks better?")  # caption
    assert await rig.fake.say(rig.client, room="dmroom", user="ada", text="be honest", url=HOOK) == 200
    (msg,) = await rig.gw.wait_inbound(1)
    assert [a.name for a in msg.attachments] == ["before.jpg", "after.jpg"]
    assert msg.text == "which looks better?\n\nbe honest"
    assert len(msg.raw["merged_message_ids"]) == 3
    (post,) = await rig.fake.wait_posts(1)  # one answer for the lot
    assert post.message == "echo: which looks better?\n\nbe honest"
