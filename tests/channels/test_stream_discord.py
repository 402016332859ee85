"""Streaming by edits on Discord, through discord.py against the wire fake (stub host): one message
created, then edited as the reply grows (PATCH), throttled, with 429s waited out."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.discord import DiscordAdapter
from gateway.util.text import split_text
from tests.channels.stream_stub import INTERVAL, MIN_GAP, SLACK, StreamingStub, counted_streamed, show, words
from tests.channels.stub import StubGateway
from tests.fakes.discord_api import TEXT_CHANNEL_ID, Event, FakeDiscord

TOKEN = "discord-token"


@pytest.fixture
async def rig(tmp_path: Any) -> AsyncIterator[Any]:
    async def make(**channel: Any) -> tuple[FakeDiscord, StreamingStub, DiscordAdapter]:
        fake = await stack.enter_async_context(FakeDiscord(token=TOKEN))
        cfg = {"enabled": True, "token": TOKEN, "api_base": fake.api_base, "gateway_url": fake.gateway_url,
               "send_rate_per_s": 1000, "send_burst": 1000, "stream_interval_s": INTERVAL,
               "stream_first_chars": 20, **channel}
        gw = StreamingStub(StubGateway.with_channels(tmp_path, discord=cfg).config)
        await stack.enter_async_context(gw)
        adapter = DiscordAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await fake.wait_ready()
        return fake, gw, adapter

    async with contextlib.AsyncExitStack() as stack:
        yield make


def calls(fake: FakeDiscord, channel_id: int) -> list[Event]:
    return [e for e in fake.timeline if e.channel_id == channel_id]


async def settled(fake: FakeDiscord, channel_id: int, expected: list[str], timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while fake.shown(channel_id) != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the channel shows {fake.shown(channel_id)!r}")
        await asyncio.sleep(0.02)


async def test_a_dm_reply_appears_and_grows_by_throttled_edits(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = await rig()
    gw.script = words(120)
    await fake.say(user_id=111, content="tell me")
    final = "".join(gw.script).strip()
    await settled(fake, 112, [final])
    events = calls(fake, 112)
    print("\n" + show(events, events[0].at))
    assert events[0].method == "create" and len(fake.created) == 1
    assert sum(e.method == "edit" for e in events) >= 3
    assert all(b.content.startswith(a.content) for a, b in itertools.pairwise(events))
    assert events[-1].content == final
    assert min(b.at - a.at for a, b in itertools.pairwise(events)) >= MIN_GAP
    await counted_streamed(adapter)


async def test_a_429_on_an_edit_is_waited_out(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig()
    fake.throttle_edits = 1  # answers retry_after 0.3 s, which discord.py waits before trying again
    gw.script = words(120)
    await fake.say(user_id=121, content="go")
    final = "".join(gw.script).strip()
    await settled(fake, 122, [final])
    events = calls(fake, 122)
    print("\n" + show(events, events[0].at))
    refused = next(i for i, e in enumerate(events) if e.method.startswith("429"))
    assert events[refused + 1].at - events[refused].at >= 0.3 - SLACK
    assert events[-1].content == final and sum(e.method == "edit" for e in events) >= 3


async def test_a_long_guild_reply_splits_stably_at_2000(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig()
    text = " ".join(f"w{i:05d}" for i in range(700))  # ~4,900 characters: three messages
    gw.script = [text[i : i + 23] for i in range(0, len(text), 23)]
    gw.gap = 0.001
    await fake.say(user_id=131, content="long", guild=True, mention_bot=True)
    expected = split_text(text, 2000)
    await settled(fake, TEXT_CHANNEL_ID, expected)
    events = calls(fake, TEXT_CHANNEL_ID)
    order = [e.message_id for e in events]
    # a message is done once the next one is created: never edited after that
    assert order == sorted(order, key=int)
    assert fake.created[0].reference is not None and all(c.reference is None for c in fake.created[1:])


async def test_streaming_off_sends_the_reply_whole(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(stream=False)
    gw.script = words(60)
    await fake.say(user_id=141, content="whole")
    await settled(fake, 142, ["".join(gw.script).strip()])
    assert [e.method for e in calls(fake, 142)] == ["create"]
