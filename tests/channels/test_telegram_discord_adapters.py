"""Telegram and Discord adapters against their fakes through PTB and discord.py (stub host)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from adapters.discord import DiscordAdapter
from adapters.telegram import SECRET_HEADER, TelegramAdapter
from gateway.adapter import AdapterAuthError
from gateway.configread import parse_config
from gateway.types import ConversationAddress, ConversationKind, InboundMessage, Reply
from tests.channels.stub import StubGateway
from tests.fakes.discord_api import THREAD_ID, FakeDiscord
from tests.fakes.telegram_api import BOT_ID, BOT_USERNAME, FakeTelegram

TOKEN = "123456:TEST-token"
FAST = {"send_rate_per_s": 1000, "send_burst": 1000}


async def _slow_turn(message: InboundMessage) -> str:
    """A turn that outlasts a typing indicator, so the adapter has to show (and renew) one."""
    await asyncio.sleep(1.2)
    return "done"


@pytest.fixture
async def telegram(tmp_path) -> AsyncIterator[tuple[FakeTelegram, StubGateway, TelegramAdapter, asyncio.Task[None]]]:  # type: ignore[no-untyped-def]
    async with FakeTelegram(token=TOKEN) as fake, StubGateway.with_channels(tmp_path, telegram={
            "enabled": True, "token": TOKEN, "base_url": fake.base_url, "poll_timeout_s": 1, **FAST}) as gw:
        adapter = TelegramAdapter(gw)  # type: ignore[arg-type]
        task = gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        yield fake, gw, adapter, task


async def test_telegram_private_round_trip_with_html(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, _ = telegram
    await fake.push(fake.make_update(user_id=42, text="hi **there** <you>", first_name="Ada"))
    (msg,) = await gw.wait_inbound(1)
    assert (msg.channel, msg.account_id, msg.kind, msg.conversation_id) == ("telegram", "42", ConversationKind.DM, "42")
    assert msg.mentioned and msg.display_name == "Ada"
    (sent,) = await fake.wait_sent(1)
    assert sent.chat_id == 42 and sent.parse_mode == "HTML"
    assert sent.text == "echo: hi <b>there</b> &lt;you&gt;"
    assert [c["command"] for c in fake.commands] == ["start", "help", "new", "otr", "link"]


async def test_telegram_group_mentions_replies_and_attachments(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, _ = telegram
    handle = f"@{BOT_USERNAME}"
    plain = fake.make_update(user_id=5, chat_id=-100, text="just chatting")
    mention = fake.make_update(user_id=5, chat_id=-100, text=f"{handle} help",
                               entities=[{"type": "mention", "offset": 0, "length": len(handle)}])
    reply = fake.make_update(user_id=6, chat_id=-100, text="and you?", reply_to_message={
        "message_id": 1, "date": 0, "chat": {"id": -100, "type": "supergroup", "title": "g"},
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Kith"}, "text": "earlier"})
    photo = fake.make_update(user_id=5, text=None, caption="look", photo=[
        {"file_id": "small", "file_unique_id": "s", "width": 10, "height": 10},
        {"file_id": "big", "file_unique_id": "b", "width": 100, "height": 100, "file_size": 999}])
    voice = fake.make_update(user_id=5, text=None, voice={"file_id": "v1", "file_unique_id": "v", "duration": 2,
                                                          "mime_type": "audio/ogg"})
    await fake.push(plain, mention, reply, photo, voice)
    msgs = sorted(await gw.wait_inbound(5), key=lambda m: m.raw["update_id"])
    assert [m.mentioned for m in msgs[:3]] == [False, True, True]
    assert all(m.kind is ConversationKind.GROUP for m in msgs[:3])
    assert msgs[3].text == "look" and msgs[3].attachments[0].platform_id == "big"
    assert msgs[4].attachments[0].kind == "voice" and msgs[4].text == ""
    await fake.wait_sent(5)
    group_replies = [s for s in fake.sent if s.chat_id == -100]
    assert all(s.reply_to is not None for s in group_replies)


async def test_telegram_long_reply_chunks_in_order_with_retry_after(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter, _ = telegram
    fake.throttle_next, fake.retry_after = 1, 1
    text = "\n".join(f"line {i:04d} " + "z" * 60 for i in range(200))
    await adapter.send(ConversationAddress(channel="telegram", conversation_id="42"), Reply(text=text))
    assert len(fake.sent) >= 4 and all(len(s.text) <= 4096 for s in fake.sent)
    numbers = [int(line.split()[1]) for s in fake.sent for line in s.text.splitlines()]
    assert numbers == list(range(200))


async def test_telegram_typing_is_shown_while_a_slow_turn_runs(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, _ = telegram
    gw.answer = _slow_turn
    await fake.push(fake.make_update(user_id=42, text="think hard"))
    await fake.wait_sent(1)
    assert (42, "typing") in fake.actions


async def test_telegram_revoked_token_raises_auth_error(telegram) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, _adapter, task = telegram
    fake.revoke()
    with pytest.raises(AdapterAuthError):
        await asyncio.wait_for(task, 15)


async def test_telegram_bad_token_at_start(tmp_path) -> None:  # type: ignore[no-untyped-def]
    async with FakeTelegram(token="other:token") as fake:
        gw = StubGateway.with_channels(tmp_path, telegram={"enabled": True, "token": TOKEN, "base_url": fake.base_url})
        with pytest.raises(AdapterAuthError):
            await asyncio.wait_for(TelegramAdapter(gw).run(), 10)  # type: ignore[arg-type]


async def test_telegram_webhook_secret_and_bad_payloads(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING, "kith.adapters.telegram")
    secret = "s3cret-Token_value"
    async with FakeTelegram(token=TOKEN) as fake, StubGateway(parse_config({
        "data_dir": str(tmp_path),
        "server": {"token": "server-token-0123456789"},  # a public webhook URL needs it (docs/security.md#proxies)
        "channels": {"telegram": {
            "enabled": True, "token": TOKEN, "base_url": fake.base_url, "mode": "webhook", "webhook_secret": secret,
            "webhook_url": "https://bot.example/telegram/webhook", **FAST}},
    }, env={})) as gw:
        adapter = TelegramAdapter(gw)  # type: ignore[arg-type]
        client = await gw.mount(adapter)
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        assert fake.webhook["url"] == "https://bot.example/telegram/webhook" and fake.webhook["secret_token"] == secret
        update = fake.make_update(user_id=9, text="via webhook")
        for headers in ({}, {SECRET_HEADER: "wrong"}, {SECRET_HEADER: secret + "x"}, {SECRET_HEADER: secret[:-1]}):
            resp = await client.post("/telegram/webhook", json=update, headers=headers)
            assert resp.status == 401
        for bad in (b"nope", b"[]", b'{"update_id": "x"}', b'{"update_id": 5, "message": {"chat": 3}}'):
            resp = await client.post("/telegram/webhook", data=bad, headers={SECRET_HEADER: secret})
            assert resp.status == 400, bad
        resp = await client.post("/telegram/webhook", data=b"x" * 1_000_000, headers={SECRET_HEADER: secret})
        assert resp.status == 400
        resp = await client.post("/telegram/webhook", json=update, headers={SECRET_HEADER: secret})
        assert resp.status == 200
        (msg,) = await gw.wait_inbound(1)
        assert msg.text == "via webhook"
        await fake.wait_sent(1)
        assert "without the right secret" in caplog.text and "payload refused" in caplog.text
        assert secret not in caplog.text and TOKEN not in caplog.text


async def test_telegram_webhook_mode_refuses_to_start_without_secret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from adapters.telegram_config import TelegramConfig

    cfg = TelegramConfig(enabled=True, token=TOKEN, mode="webhook")  # type: ignore[arg-type]
    gw = StubGateway.with_channels(tmp_path)
    with pytest.raises(AdapterAuthError, match="secret"):
        await TelegramAdapter(gw, cfg).run()  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ discord


@pytest.fixture
async def discord_rig(tmp_path) -> AsyncIterator[tuple[FakeDiscord, StubGateway, DiscordAdapter, asyncio.Task[None]]]:  # type: ignore[no-untyped-def]
    async with FakeDiscord(token="discord-token") as fake, StubGateway.with_channels(tmp_path, discord={
            "enabled": True, "token": "discord-token", "api_base": fake.api_base, "gateway_url": fake.gateway_url,
            **FAST}) as gw:
        adapter = DiscordAdapter(gw)  # type: ignore[arg-type]
        task = gw.start(adapter)
        await fake.wait_ready()
        yield fake, gw, adapter, task


async def test_discord_dm_guild_thread_round_trips(discord_rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, _ = discord_rig
    await fake.say(user_id=111, content="hello dm", name="ada")
    (dm,) = await gw.wait_inbound(1)
    assert (dm.channel, dm.account_id, dm.kind, dm.mentioned) == ("discord", "111", ConversationKind.DM, True)
    (created,) = await fake.wait_created(1)
    assert created.content == "echo: hello dm" and created.channel_id == 112
    await fake.say(user_id=111, content="no mention", guild=True)
    await fake.say(user_id=111, content="hi bot", guild=True, mention_bot=True)
    await fake.say(user_id=111, content="in thread", channel_id=THREAD_ID, guild=True, mention_bot=True)
    await fake.say(user_id=222, content="i am a bot", bot_author=True)
    msgs = await gw.wait_inbound(4)
    assert [m.mentioned for m in msgs[1:]] == [False, True, True]
    assert msgs[2].text == "@kith hi bot" and msgs[3].raw["parent_id"]
    assert msgs[3].conversation_id == str(THREAD_ID) and msgs[3].kind is ConversationKind.GROUP
    await fake.wait_created(4)
    assert fake.created[2].reference is not None  # guild replies quote the question
    await asyncio.sleep(0.1)
    assert len(gw.inbound) == 4  # the bot author was ignored


async def test_discord_chunks_2000_in_order_and_retries_429(discord_rig) -> None:  # type: ignore[no-untyped-def]
    fake, _gw, adapter, _ = discord_rig
    fake.throttle_next = 2
    text = " ".join(f"w{i:05d}" for i in range(1500))
    await adapter.send(ConversationAddress(channel="discord", conversation_id="555"), Reply(text=text))
    assert len(fake.created) >= 6 and all(len(c.content) <= 2000 for c in fake.created)
    assert " ".join(c.content for c in fake.created).split() == text.split()


async def test_discord_rejected_token_is_an_auth_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    async with FakeDiscord(token="right") as fake, FakeDiscord(token="tok") as fake_ok:
        gw = StubGateway.with_channels(tmp_path, discord={"enabled": True, "token": "wrong", "api_base": fake.api_base,
                                                          "gateway_url": fake.gateway_url})
        with pytest.raises(AdapterAuthError):
            await asyncio.wait_for(DiscordAdapter(gw).run(), 10)  # type: ignore[arg-type]
        # login passes, then the gateway closes the session with 4004
        gw2 = StubGateway.with_channels(tmp_path, discord={"enabled": True, "token": "tok",
                                                           "api_base": fake_ok.api_base,
                                                           "gateway_url": fake_ok.gateway_url})
        original = fake_ok._identify

        async def identify_reject(ws, data):  # type: ignore[no-untyped-def]
            data = dict(data, token="revoked")
            await original(ws, data)

        fake_ok._identify = identify_reject  # type: ignore[method-assign]
        with pytest.raises(AdapterAuthError, match="4004"):
            await asyncio.wait_for(DiscordAdapter(gw2).run(), 10)  # type: ignore[arg-type]


async def test_discord_typing_is_shown_while_a_slow_turn_runs(discord_rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, _ = discord_rig
    gw.answer = _slow_turn
    await fake.say(user_id=333, content="think hard")
    await fake.wait_created(1)
    assert 334 in fake.typing and fake.created[0].content == "done"
