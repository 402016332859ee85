"""End to end through the real Gateway: round trips, pairing, identity linking, dedupe, strangers."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import main as kith
from tests.channels.rig import ADA_DC, ADA_NC, ADA_ROOM, ADA_TG, TG_WEBHOOK_SECRET, Rig, start_rig, wait_for
from tests.fakes.anthropic import API_KEY, FakeAnthropic


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    rig = await start_rig(tmp_path)
    yield rig
    await rig.stop()


async def test_dm_round_trip_on_each_channel(rig: Rig) -> None:
    await rig.tg_say("hello from telegram")
    await rig.dc_say("hello from discord")
    assert await rig.nc_say("hello from nextcloud") == 200
    (tg,) = await rig.tg.wait_sent(1)
    (dc,) = await rig.dc.wait_created(1)
    (nc,) = await rig.nc.wait_posts(1)
    assert tg.chat_id == ADA_TG and "echo: hello from telegram" in tg.text
    assert dc.channel_id == ADA_DC + 1 and dc.content.startswith("echo: hello from discord")
    assert nc.room == ADA_ROOM and nc.message.startswith("echo: hello from nextcloud")
    assert rig.turns("telegram") == rig.turns("discord") == rig.turns("nextcloud") == 1
    health = json.loads(await (await rig.http.get(f"{rig.base}/healthz")).text())
    assert {health["adapters"][n]["state"] for n in ("telegram", "discord", "nextcloud")} == {"running"}


async def test_group_messages_need_allowlist_and_mention(tmp_path: Path) -> None:
    from tests.fakes.discord_api import TEXT_CHANNEL_ID

    rig = await start_rig(tmp_path, discord={"group_allow": [str(TEXT_CHANNEL_ID)]},
                          nextcloud={"group_allow": ["team"]})
    try:
        await rig.dc_say("chatter", guild=True)
        await rig.dc_say("question", guild=True, mention_bot=True)
        await rig.nc_say("chatter", room="team", user="bob")
        await rig.nc_say("@kith question", room="team", user="bob")
        await rig.nc_say("@kith question", room="other-room", user="bob")  # room not allowed
        await rig.tg_say("@kith_test_bot hi", chat_id=-500, user_id=77)  # group not allowed on telegram
        (dc,) = await rig.dc.wait_created(1)
        (nc,) = await rig.nc.wait_posts(1)
        await asyncio.sleep(0.3)
        assert "question" in dc.content and dc.reference is not None
        assert "question" in nc.message and nc.room == "team"
        assert rig.turns() == 2 and rig.tg.sent == []
        # the shared room is its own conversation: group scope, not bob's DM session
        keys = {r["conversation_key"] for r in rig.select_rows("SELECT conversation_key FROM turns")}
        assert keys == {f"discord:{TEXT_CHANNEL_ID}", "nextcloud:team"}
    finally:
        await rig.stop()


async def test_pairing_flow_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rig = await start_rig(tmp_path, access={"dm_policy": "pairing"})
    try:
        stranger = 5555
        await rig.tg_say("hi, who are you?", user_id=stranger)
        (notice,) = await rig.tg.wait_sent(1)
        code = re.search(r"pairing code is ([A-Z0-9]{8})", notice.text)
        assert code, notice.text
        await rig.tg_say("hello??", user_id=stranger)  # answered at most once per interval: no new code
        await asyncio.sleep(0.3)
        assert len(rig.tg.sent) == 1 and rig.turns() == 0
        assert kith(["-c", str(rig.config_path), "pairing", "list"]) == 0
        assert code.group(1) in capsys.readouterr().out
        assert kith(["-c", str(rig.config_path), "pairing", "approve", code.group(1)]) == 0
        assert f"approved telegram:{stranger}" in capsys.readouterr().out
        await rig.tg_say("now can we talk?", user_id=stranger)
        sent = await rig.tg.wait_sent(2)
        assert "echo: now can we talk?" in sent[1].text and rig.turns("telegram") == 1
        assert kith(["-c", str(rig.config_path), "pairing", "approve", code.group(1)]) == 1  # single use
    finally:
        await rig.stop()


async def test_unknown_senders_never_reach_model_or_memory(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    # Three slots (the default is 20 since issue 12): a flood within the protected 10 minutes gets silence.
    rig = await start_rig(tmp_path, llm=llm, access={"dm_policy": "pairing", "pairing_max_pending": 3})
    try:
        for i in range(200):
            await rig.tg.push(rig.tg.make_update(user_id=900_000 + i, text=f"spam {i}"))
        for i in range(150):
            await rig.dc_say(f"spam {i}", user_id=700_000 + i)
        statuses = [await rig.nc_say(f"spam {i}", user=f"stranger{i}") for i in range(150)]
        assert set(statuses) == {200}
        # every stranger went through the access policy: 500 pairing requests seen or refused
        await wait_for(lambda: _pairing_requests(rig) + _refused(rig) >= 500, what="500 decisions")
        await asyncio.sleep(0.3)
        assert fake.requests == []  # zero model calls
        for table in ("users", "identities", "sessions", "turns", "conversations"):
            assert rig.count_rows(f"SELECT COUNT(*) FROM {table}") == 0, table
        data = Path(rig.gw.config.data_dir)
        assert not any((data / "users").rglob("*")) and not any((data / "channels").rglob("*"))
        # only the first few strangers per channel get a code; the rest get silence
        assert len(rig.tg.sent) <= 3 and len(rig.dc.created) <= 3 and len(rig.nc.posted) <= 3
    finally:
        await rig.stop()
        await fake.stop()


def _pairing_requests(rig: Rig) -> int:
    return rig.count_rows("SELECT COALESCE(SUM(requests), 0) FROM access_pairing")


_REFUSED: dict[int, int] = {}


def _refused(rig: Rig) -> int:
    # Strangers beyond the pending cap leave no row; count them from the adapters' inbound counters.
    tg = rig.gw.adapters["telegram"].stats["updates"]  # type: ignore[attr-defined]
    dc = rig.gw.adapters["discord"].stats["messages"]  # type: ignore[attr-defined]
    nc = rig.gw.adapters["nextcloud"].stats["accepted"]  # type: ignore[attr-defined]
    return tg + dc + nc - _pairing_requests(rig)


async def test_each_update_three_times_shuffled_is_one_turn(tmp_path: Path) -> None:
    rig = await start_rig(tmp_path, telegram={"mode": "webhook", "webhook_secret": TG_WEBHOOK_SECRET})
    try:
        hook = f"{rig.base}/telegram/webhook"
        tg_updates = [rig.tg.make_update(user_id=ADA_TG, text=f"tg {i}") for i in range(5)]
        dc_messages = [rig.dc.message(user_id=ADA_DC, content=f"dc {i}") for i in range(5)]
        nc_bodies = [json.dumps(rig.nc.payload(room=ADA_ROOM, user=ADA_NC, text=f"nc {i}")).encode()
                     for i in range(5)]
        deliveries: list[tuple[str, Any]] = [(kind, item) for kind, items in
                                             (("tg", tg_updates), ("dc", dc_messages), ("nc", nc_bodies))
                                             for item in items for _ in range(3)]
        random.Random(7).shuffle(deliveries)
        for kind, item in deliveries:
            if kind == "tg":
                async with rig.http.post(hook, json=item, headers={"X-Telegram-Bot-Api-Secret-Token":
                                                                   TG_WEBHOOK_SECRET}) as resp:
                    assert resp.status == 200
            elif kind == "dc":
                await rig.dc.dispatch("MESSAGE_CREATE", item)
            else:  # Talk re-signs every delivery with a fresh random; only the message id repeats
                await rig.nc.deliver(rig.http, item, rig.nc.signed_headers(item))
        await wait_for(lambda: rig.turns() >= 15, what="15 turns")
        await wait_for(lambda: len(rig.tg.sent) >= 5 and len(rig.dc.created) >= 5 and len(rig.nc.posted) >= 5,
                       what="15 replies")
        await asyncio.sleep(0.5)  # room for a duplicate turn or reply, which the asserts below would catch
        assert (rig.turns("telegram"), rig.turns("discord"), rig.turns("nextcloud")) == (5, 5, 5)
        assert len(rig.tg.sent) == 5 and len(rig.dc.created) == 5 and len(rig.nc.posted) == 5
    finally:
        await rig.stop()


async def test_one_person_linked_across_three_channels(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm)
    try:
        async def dc_said(n: int) -> str:
            return (await rig.dc.wait_created(n))[n - 1].content

        async def nc_said(n: int) -> str:
            return (await rig.nc.wait_posts(n))[n - 1].message

        def confirm(text: str) -> str:
            found = re.search(r"/link confirm ([A-Z0-9]{4})\b", text)
            assert found, text
            return f"/link confirm {found.group(1)}"

        # One live code per user at a time; since issue 12 both accounts confirm before the merge.
        for redeem, said in ((rig.dc_say, dc_said), (rig.nc_say, nc_said)):
            n = len(rig.tg.sent)
            await rig.tg_say("/link")
            sent = await rig.tg.wait_sent(n + 1)
            found = re.search(r"link code is ([A-Z0-9-]+)", sent[-1].text)
            assert found, sent[-1].text
            await redeem(f"/link {found.group(1).rstrip('.')}")
            asked = await said(1)
            told = (await rig.tg.wait_sent(n + 2))[-1].text  # the Telegram side is asked in its own chat
            await rig.tg_say(confirm(told))
            await rig.tg.wait_sent(n + 3)
            await redeem(confirm(asked))
            assert "Linked" in await said(2)
            await rig.tg.wait_sent(n + 4)  # "Linked" on the Telegram side too
        users = {r["user_id"] for r in rig.select_rows("SELECT user_id FROM identities")}
        assert len(users) == 1
        (user_id,) = users

        await rig.tg_say("Remember this: my cat is called Miso.")
        await rig.tg.wait_sent(9)
        await rig.dc_say("What is my cat called?")
        await rig.dc.wait_created(3)
        asked = json.dumps(fake.last_turn())
        assert "Miso" in asked  # the fact told on Telegram reached the model on Discord
        await rig.nc_say("And what did I ask on Discord?")
        await rig.nc.wait_posts(3)
        assert "What is my cat called?" in json.dumps(fake.last_turn())
        assert {r["user_id"] for r in rig.select_rows("SELECT DISTINCT user_id FROM turns")} == {user_id}
    finally:
        await rig.stop()
        await fake.stop()


async def test_fact_told_on_telegram_is_recalled_on_discord_from_memory(tmp_path: Path) -> None:
    """Like the linking test, but the Discord question starts a fresh session (/new), so the fact can
    only come from memory recall, not from the shared session history."""
    fake = await FakeAnthropic().start()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm, extra={"identity_links": [
        {"user": "ada", "accounts": [f"telegram:{ADA_TG}", f"discord:{ADA_DC}", f"nextcloud:users/{ADA_NC}"]}]})
    try:
        await rig.tg_say("Remember this: my cat is called Miso.")
        await rig.tg.wait_sent(1)
        await rig.gw.settle()  # the session log is written and indexed through the job bus
        await rig.dc_say("/new")
        await rig.dc.wait_created(1)
        await rig.dc_say("What is my cat called?")
        await rig.dc.wait_created(2)
        request = fake.last_turn()
        assert [m["role"] for m in request["messages"]] == ["user"], "a fresh session: no shared history"
        system = json.dumps(request["system"])
        assert "Recalled memories" in system and "Miso" in system
    finally:
        await rig.stop()
        await fake.stop()
