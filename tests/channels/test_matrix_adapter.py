"""The Matrix adapter through mautrix against a local homeserver fake (tests/fakes/matrix_hs.py):
sync with a stored next_batch, DMs and rooms, mentions, edits, media in and out, pacing, auth."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mautrix")

from adapters.matrix import MatrixAdapter
from gateway.adapter import AdapterAuthError
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.types import ConversationAddress, ConversationKind, Reply
from tests.channels.stub import StubGateway
from tests.fakes.matrix_hs import BOT, FakeHomeserver
from tests.fakes.serve import arrived

TOKEN = "syt_kith_test_token"
ADA = "@ada:fake.test"
DM = "!dm:fake.test"
ROOM = "!team:fake.test"
PHOTO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def _section(fake: FakeHomeserver, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "homeserver": fake.base_url, "access_token": TOKEN, "sync_timeout_s": 1,
            "send_rate_per_s": 1000, "send_burst": 1000, **extra}


@pytest.fixture
async def matrix(tmp_path: Path) -> AsyncIterator[tuple[FakeHomeserver, StubGateway, MatrixAdapter]]:
    async with FakeHomeserver(token=TOKEN) as fake:
        await fake.direct({ADA: [DM]})  # before kith ever synced: the initial sync carries it
        async with StubGateway.with_channels(tmp_path, matrix=_section(fake)) as gw:
            adapter = MatrixAdapter(gw)  # type: ignore[arg-type]
            gw.start(adapter)
            await asyncio.wait_for(adapter.ready.wait(), 10)
            yield fake, gw, adapter


async def test_dm_round_trip_and_own_messages_are_not_turns(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = matrix
    event_id = await fake.say(DM, ADA, "hello kith")
    (msg,) = await gw.wait_inbound(1)
    assert (msg.channel, msg.account_id, msg.conversation_id, msg.kind) == ("matrix", ADA, DM, ConversationKind.DM)
    assert msg.text == "hello kith" and msg.message_id == event_id and msg.mentioned and msg.display_name == "ada"
    (sent,) = await fake.wait_sent(1)
    assert sent["room"] == DM and sent["content"] == {"msgtype": "m.text", "body": "echo: hello kith"}
    await fake.say(DM, ADA, "again")
    await gw.wait_inbound(2)
    await fake.wait_sent(2)
    # The bot's own events came back in the timeline twice over: none became a turn.
    assert [m.text for m in gw.inbound] == ["hello kith", "again"]


async def test_history_before_the_first_start_is_not_answered(tmp_path: Path) -> None:
    async with FakeHomeserver(token=TOKEN) as fake:
        await fake.say(DM, ADA, "said while kith was not there")
        async with StubGateway.with_channels(tmp_path, matrix=_section(fake)) as gw:
            adapter = MatrixAdapter(gw)  # type: ignore[arg-type]
            gw.start(adapter)
            await asyncio.wait_for(adapter.ready.wait(), 10)
            await fake.say(DM, ADA, "now")
            (msg,) = await gw.wait_inbound(1)
            assert msg.text == "now"


async def test_next_batch_is_stored_and_a_restart_resumes_from_it(tmp_path: Path) -> None:
    async with FakeHomeserver(token=TOKEN) as fake:
        async with StubGateway.with_channels(tmp_path, matrix=_section(fake)) as gw:
            adapter = MatrixAdapter(gw)  # type: ignore[arg-type]
            gw.start(adapter)
            await asyncio.wait_for(adapter.ready.wait(), 10)
            await fake.invite("!bob-dm:fake.test", "@bob:fake.test", is_direct=True)
            await fake.say(DM, ADA, "one")
            await gw.wait_inbound(1)
            await fake.wait_sent(1)
        stored = json.loads((tmp_path / "channels" / "matrix" / "sync.json").read_text())
        assert stored["user_id"] == BOT and stored["next_batch"].startswith("s")
        assert stored["direct"] == ["!bob-dm:fake.test"]  # learnt from the invite, which is not repeated
        await fake.say(DM, ADA, "two, while kith was down")
        await fake.say("!bob-dm:fake.test", "@bob:fake.test", "hi after the restart")
        async with StubGateway.with_channels(tmp_path, matrix=_section(fake)) as gw2:
            adapter = MatrixAdapter(gw2)  # type: ignore[arg-type]
            gw2.start(adapter)
            # Two rooms of one sync: their order is not the test's point (the adapter may take them in any).
            by_text = {m.text: m for m in await gw2.wait_inbound(2)}
            assert set(by_text) == {"two, while kith was down", "hi after the restart"}  # not "one": it was
            assert by_text["hi after the restart"].kind is ConversationKind.DM  # before the stored position
        assert fake.syncs.count(None) == 1  # one initial sync in all: the second start resumed


async def test_rooms_need_a_mention_and_replies_thread(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = matrix
    await fake.say(ROOM, ADA, "talking among ourselves")
    await fake.say(ROOM, ADA, "hey kith, what's up", **{"m.mentions": {"user_ids": [BOT]}})
    plain, mentioned = await gw.wait_inbound(2)
    assert plain.kind is ConversationKind.GROUP and not plain.mentioned
    assert mentioned.mentioned
    sent = await fake.wait_sent(2)
    # In a room the answer is a reply to the message it answers.
    assert sent[1]["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": mentioned.message_id}}
    await fake.say(ROOM, ADA, "> <@kith:fake.test> echo\n\nand a follow-up",
                   **{"m.relates_to": {"m.in_reply_to": {"event_id": sent[1]["event_id"]}}})
    await fake.say(ROOM, ADA, "@kith:fake.test by name")  # an older client: no m.mentions
    await fake.say(ROOM, ADA, "kith is great, says Bob", **{"m.mentions": {"user_ids": ["@bob:fake.test"]}})
    reply, by_name, about = (await gw.wait_inbound(5))[2:]
    assert reply.mentioned and reply.text == "and a follow-up" and reply.reply_to == sent[1]["event_id"]
    assert by_name.mentioned
    assert not about.mentioned  # its client said whom it mentions, and that is not the bot


async def test_edits_are_turns_with_the_new_text_and_notices_are_ignored(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = matrix
    original = await fake.say(DM, ADA, "remind me at 5")
    await fake.say(DM, ADA, "* remind me at 6", **{
        "m.new_content": {"msgtype": "m.text", "body": "remind me at 6"},
        "m.relates_to": {"rel_type": "m.replace", "event_id": original}})
    await fake.say(DM, "@otherbot:fake.test", "I am a bot", msgtype="m.notice")
    await fake.say(DM, ADA, "last")
    _first, edit, last = await gw.wait_inbound(3)
    assert edit.text == "remind me at 6" and edit.raw["edit_of"] == original and edit.message_id != original
    assert last.text == "last"


async def test_invites_are_joined_and_is_direct_makes_a_dm(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = matrix
    await fake.invite("!new:fake.test", "@bob:fake.test", is_direct=True)
    await arrived(fake.joined, 1, "joins")
    await fake.say("!new:fake.test", "@bob:fake.test", "hi")
    (msg,) = await gw.wait_inbound(1)
    assert msg.kind is ConversationKind.DM and msg.mentioned


async def test_media_in_is_fetched_from_the_content_repository(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = matrix
    mxc = fake.add_media(PHOTO, "image/png")
    await fake.say(DM, ADA, "cat.png", msgtype="m.image", url=mxc, info={"mimetype": "image/png", "size": len(PHOTO)})
    notes = fake.add_media(b"n", "text/plain")
    await fake.say(DM, ADA, "look at this", msgtype="m.file", filename="notes.txt", url=notes,
                   info={"mimetype": "text/plain", "size": 1})
    photo_msg, file_msg = await gw.wait_inbound(2)
    (att,) = photo_msg.attachments
    assert photo_msg.text == "" and (att.kind, att.name, att.mime_type, att.size) == ("photo", "cat.png", "image/png",
                                                                                      len(PHOTO))
    assert await adapter.fetch_attachment(att, max_bytes=1 << 20) == PHOTO
    assert file_msg.text == "look at this" and file_msg.attachments[0].name == "notes.txt"
    with pytest.raises(TooLarge):
        await adapter.fetch_attachment(att, max_bytes=100)
    assert fake.downloads == [mxc.rsplit("/", 1)[1]]  # refused from the declared size, not downloaded again


async def test_files_out_are_uploaded_then_posted(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter = matrix
    event_id = await adapter.send_file(ConversationAddress(channel="matrix", conversation_id=DM),
                                       name="chart.png", mime_type="image/png", data=PHOTO)
    (sent,) = await fake.wait_sent(1)
    content = sent["content"]
    assert sent["event_id"] == event_id and content["msgtype"] == "m.image" and content["body"] == "chart.png"
    assert fake.uploads == ["chart.png"]
    assert fake.media[content["url"].rsplit("/", 1)[1]][0] == PHOTO


async def test_proactive_send_is_split_and_survives_a_rate_limit(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter = matrix
    fake.throttle_next = 1  # mautrix keeps no retry_after_ms: the adapter waits a second
    long = "word " * 5000  # 25,000 characters: two events at the 16,000 limit
    await adapter.send(ConversationAddress(channel="matrix", conversation_id=DM), Reply(text=long))
    sent = await fake.wait_sent(2)
    assert len(sent) == 2 and all(len(s["content"]["body"]) <= 16_000 for s in sent)
    assert " ".join(s["content"]["body"] for s in sent).split() == long.split()


async def test_a_refused_token_stops_the_adapter_only(tmp_path: Path) -> None:
    async with FakeHomeserver(token=TOKEN) as fake, StubGateway.with_channels(tmp_path, matrix=_section(fake)) as gw:
        fake.revoke()
        adapter = MatrixAdapter(gw)  # type: ignore[arg-type]
        with pytest.raises(AdapterAuthError, match="refused the access token"):
            await asyncio.wait_for(adapter.run(), 10)


async def test_malformed_events_are_refused_and_the_loop_goes_on(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = matrix
    await fake.raw_event(DM, {"type": "m.room.message", "sender": ADA, "event_id": "$bad", "content": {"body": 5,
                                                                                                  "msgtype": "m.text"}})
    await fake.raw_event(DM, {"type": "m.room.message", "sender": ADA, "event_id": "$img",
                              "content": {"msgtype": "m.image", "body": "x", "url": "https://evil.example/x"}})
    await fake.raw_event(DM, {"type": "m.room.encrypted", "sender": ADA, "event_id": "$enc", "content": {}})
    await fake.say(DM, ADA, "fine")
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "fine"
    assert adapter.stats["refused"] == 2 and adapter.stats["encrypted_ignored"] == 1


async def test_a_refused_upload_is_attachment_unavailable(matrix) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter = matrix
    fake.revoke()
    with pytest.raises(AttachmentUnavailable, match=r"refused 'x\.bin'"):
        await adapter.send_file(ConversationAddress(channel="matrix", conversation_id=DM), name="x.bin",
                                mime_type="application/octet-stream", data=b"x")
