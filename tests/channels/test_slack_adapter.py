"""The Slack adapter through slack-sdk against a local Slack (tests/fakes/slack_api.py): Socket Mode
envelopes acked and turned into turns, the Events API's signature, window and replay checks, threads,
the slash command, files in and out, rate limits and refused tokens."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

pytest.importorskip("slack_sdk")

from adapters.slack import SlackAdapter, to_mrkdwn
from gateway.adapter import AdapterAuthError
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.types import Attachment, ConversationAddress, ConversationKind, Reply
from tests.channels.rig import wait_for
from tests.channels.stub import StubGateway
from tests.fakes.serve import arrived
from tests.fakes.slack_api import BOT_USER, FakeSlack

BOT_TOKEN = "xoxb-kith-test"
APP_TOKEN = "xapp-kith-test"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
ADA = "UADA"
PDF = b"%PDF-1.4\n" + b"0" * 3000 + b"\n%%EOF\n"


def _section(fake: FakeSlack, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "signing_secret": SECRET,
            "api_base": fake.api_base, "send_rate_per_s": 1000, "send_burst": 1000, **extra}


@pytest.fixture
async def socket(tmp_path: Path) -> AsyncIterator[tuple[FakeSlack, StubGateway, SlackAdapter]]:
    async with FakeSlack(bot_token=BOT_TOKEN, app_token=APP_TOKEN) as fake, \
            StubGateway.with_channels(tmp_path, slack=_section(fake)) as gw:  # fmt: skip
        adapter = SlackAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        yield fake, gw, adapter


@pytest.fixture
async def events(tmp_path: Path) -> AsyncIterator[tuple[FakeSlack, StubGateway, SlackAdapter, str]]:
    async with FakeSlack(bot_token=BOT_TOKEN, app_token=APP_TOKEN) as fake, \
            StubGateway.with_channels(tmp_path, slack=_section(fake, mode="events")) as gw:  # fmt: skip
        adapter = SlackAdapter(gw)  # type: ignore[arg-type]
        client = await gw.mount(adapter)
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        yield fake, gw, adapter, str(client.make_url("/slack/events"))


async def test_socket_mode_dm_is_acked_then_answered(socket) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = socket
    payload = fake.message(user=ADA, channel="DADA", text="hello *there* &amp; you")
    envelope = await fake.push_event(payload)
    (msg,) = await gw.wait_inbound(1)
    assert envelope in fake.acks
    assert (msg.channel, msg.account_id, msg.conversation_id, msg.kind) == ("slack", ADA, "DADA", ConversationKind.DM)
    assert msg.text == "hello *there* & you" and msg.mentioned
    (posted,) = await fake.wait_posted(1)
    assert posted["channel"] == "DADA" and "thread_ts" not in posted
    assert posted["text"] == "echo: hello *there* &amp; you"  # & escaped again for mrkdwn


async def test_channels_need_a_mention_and_answers_go_to_the_thread(socket) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = socket
    await fake.push_event(fake.message(user=ADA, channel="CTEAM", text="just chatting", channel_type="channel"))
    mentioned = fake.message(user=ADA, channel="CTEAM", text=f"<@{BOT_USER}> what is up", channel_type="channel")
    await fake.push_event(mentioned)
    # The same post as an app_mention (both subscriptions on): one turn, deduped by channel:ts.
    await fake.push_event({**mentioned, "event": {**mentioned["event"], "type": "app_mention"}})
    plain, addressed, again = await gw.wait_inbound(3)
    assert not plain.mentioned and plain.kind is ConversationKind.GROUP
    assert addressed.mentioned and addressed.text == "what is up"
    assert again.message_id == addressed.message_id
    ts = mentioned["event"]["ts"]
    posted = await fake.wait_posted(3)
    assert all(p.get("thread_ts") for p in posted)  # in a channel every answer goes to a thread
    assert posted[1]["thread_ts"] == ts


async def test_own_and_other_bots_messages_and_edits_are_not_turns(socket) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = socket
    await fake.push_event(fake.message(user=BOT_USER, channel="DADA", text="my own"))
    await fake.push_event(fake.message(user="UBOT2", channel="DADA", text="a bot", bot_id="B2"))
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="edited", subtype="message_changed"))
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="real"))
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "real"
    await arrived(fake.acks, 4, "acks")  # every envelope acked, turn or not


async def test_slash_command_runs_the_kith_command_in_the_dm(socket) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = socket
    await fake.push_command(user=ADA, text="link ABCD2345")
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "/link ABCD2345" and msg.conversation_id == f"D{ADA}" and msg.kind is ConversationKind.DM
    (posted,) = await fake.wait_posted(1)
    assert posted["channel"] == f"D{ADA}" and "conversations.open" in fake.calls


async def test_socket_mode_reconnects_when_slack_asks(socket) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = socket
    await fake.disconnect()
    await wait_for(lambda: fake.connections == 2, what="a new Socket Mode connection")
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="after the refresh"))
    (msg,) = await gw.wait_inbound(1)
    assert msg.text == "after the refresh"


async def test_files_in_are_fetched_with_the_bot_token_only_from_slack(socket) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = socket
    item = fake.add_file(PDF, name="report.pdf", mimetype="application/pdf")
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="", subtype="file_share", files=[item]))
    (msg,) = await gw.wait_inbound(1)
    (att,) = msg.attachments
    assert (att.kind, att.name, att.size, att.mime_type) == ("document", "report.pdf", len(PDF), "application/pdf")
    assert await adapter.fetch_attachment(att, max_bytes=1 << 20) == PDF
    with pytest.raises(TooLarge):
        await adapter.fetch_attachment(att, max_bytes=100)
    elsewhere = Attachment(kind="document", name="x", url="https://evil.example/files/F1")
    with pytest.raises(AttachmentUnavailable, match="not on Slack's file host"):
        await adapter.fetch_attachment(elsewhere, max_bytes=1 << 20)
    assert fake.downloads == [item["id"]]


async def test_files_out_use_the_three_step_upload(socket) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter = socket
    file_id = await adapter.send_file(ConversationAddress(channel="slack", conversation_id="DADA"),
                                      name="chart.pdf", mime_type="application/pdf", data=PDF)
    assert fake.uploads[file_id] == {"name": "chart.pdf", "length": len(PDF), "data": PDF, "channel": "DADA"}


async def test_proactive_send_is_split_and_survives_429(socket) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter = socket
    fake.throttle_next = 2
    text = "word " * 1000  # 5,000 characters: two messages
    await adapter.send(ConversationAddress(channel="slack", conversation_id="DADA"), Reply(text=text))
    posted = await fake.wait_posted(2)
    assert " ".join(p["text"] for p in posted).split() == text.split()


async def test_refused_tokens_stop_the_adapter(tmp_path: Path) -> None:
    async with FakeSlack(bot_token=BOT_TOKEN, app_token=APP_TOKEN) as fake:
        async with StubGateway.with_channels(tmp_path, slack=_section(fake, bot_token="xoxb-wrong")) as gw:
            with pytest.raises(AdapterAuthError, match=r"auth\.test"):
                await asyncio.wait_for(SlackAdapter(gw).run(), 10)  # type: ignore[arg-type]
        async with StubGateway.with_channels(tmp_path, slack=_section(fake, app_token="xapp-wrong")) as gw:
            with pytest.raises(AdapterAuthError, match=r"apps\.connections\.open"):
                await asyncio.wait_for(SlackAdapter(gw).run(), 10)  # type: ignore[arg-type]


async def test_events_api_signed_requests_are_turns(events) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, url = events
    async with aiohttp.ClientSession() as http:
        challenge = json.dumps({"type": "url_verification", "challenge": "c0ffee"}).encode()
        stamp = str(int(time.time()))
        from tests.fakes.slack_api import sign
        async with http.post(url, data=challenge, headers={"Content-Type": "application/json",
                                                            "X-Slack-Request-Timestamp": stamp,
                                                            "X-Slack-Signature": sign(SECRET, stamp, challenge)}) as r:
            assert r.status == 200 and (await r.json()) == {"challenge": "c0ffee"}
        body = json.dumps(fake.message(user=ADA, channel="DADA", text="over https")).encode()
        resp = await fake.signed_post(http, url, body, secret=SECRET)
        assert resp.status == 200
        (msg,) = await gw.wait_inbound(1)
        assert msg.text == "over https"
        await fake.wait_posted(1)
        form = fake.command_form(user=ADA, text="help")
        resp = await fake.signed_post(http, url, form, secret=SECRET, content_type="application/x-www-form-urlencoded")
        assert resp.status == 200
        assert (await gw.wait_inbound(2))[1].text == "/help"


async def test_events_api_refuses_forged_stale_and_replayed_requests(events) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter, url = events
    body = json.dumps(fake.message(user=ADA, channel="DADA", text="sneaky")).encode()
    async with aiohttp.ClientSession() as http:
        forged = await fake.signed_post(http, url, body, secret="not-the-secret")
        old = str(int(time.time()) - 400)
        stale = await fake.signed_post(http, url, body, secret=SECRET, stamp=old)
        junk = await fake.signed_post(http, url, body, secret=SECRET, stamp="12abc", signature="v0=00")
        stamp = str(int(time.time()))
        first = await fake.signed_post(http, url, body, secret=SECRET, stamp=stamp)
        replay = await fake.signed_post(http, url, body, secret=SECRET, stamp=stamp)
    assert [forged.status, stale.status, junk.status, first.status, replay.status] == [401, 401, 401, 200, 409]
    await gw.wait_inbound(1)
    await asyncio.sleep(0)
    assert len(gw.inbound) == 1
    assert adapter.stats["webhook_rejected"] == 3 and adapter.stats["webhook_replayed"] == 1


def test_mrkdwn_rendering() -> None:
    assert to_mrkdwn("**bold** and [site](https://example.org) <@U1>") == \
        "*bold* and <https://example.org|site> &lt;@U1&gt;"
