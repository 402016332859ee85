"""Streaming by edits on Nextcloud Talk, against the Talk fake (stub host): the reply is posted as the
API user through the chat API and edited as it grows (``PUT .../chat/<room>/<id>``), throttled, 429s
waited out; a server without ``edit-messages`` gets the reply whole through the bot API."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.nextcloud_talk import NextcloudTalkAdapter
from tests.channels.stream_stub import INTERVAL, MIN_GAP, SLACK, StreamingStub, counted_streamed, words
from tests.channels.stub import StubGateway
from tests.fakes.nextcloud import Event, FakeNextcloud

SECRET = "n" * 64
HOOK = "/nextcloud/webhook"


@pytest.fixture
async def rig(tmp_path: Any) -> AsyncIterator[Any]:
    async def make(**channel: Any) -> tuple[FakeNextcloud, StreamingStub, NextcloudTalkAdapter, Any]:
        fake = await stack.enter_async_context(FakeNextcloud(secret=SECRET, room_types={"dmroom": 1, "team": 2}))
        cfg = {"enabled": True, "base_url": fake.base_url, "bot_secret": SECRET, "api_user": "kithbot",
               "api_password": "app-password", "send_rate_per_s": 1000, "send_burst": 1000, "stream": True,
               "stream_interval_s": INTERVAL, "stream_first_chars": 20, **channel}
        gw = StreamingStub(StubGateway.with_channels(tmp_path, nextcloud=cfg).config)
        await stack.enter_async_context(gw)
        adapter = NextcloudTalkAdapter(gw)  # type: ignore[arg-type]
        client = await gw.mount(adapter)
        gw.start(adapter)
        fake.echo_to = (client, HOOK)  # the API user's posts come back to the bot, as in Talk
        return fake, gw, adapter, client

    async with contextlib.AsyncExitStack() as stack:
        yield make


def calls(fake: FakeNextcloud, room: str) -> list[Event]:
    return [e for e in fake.timeline if e.room == room]


async def settled(fake: FakeNextcloud, room: str, expected: list[str], timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while fake.shown(room) != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the room shows {fake.shown(room)!r}")
        await asyncio.sleep(0.02)


async def test_a_reply_grows_by_throttled_edits_and_ends_exact(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter, client = await rig()
    gw.script = ["Here **is** the plan:\n", *words(120)]
    await fake.say(client, room="dmroom", user="ada", text="tell me", url=HOOK)
    final = "".join(gw.script).strip()
    await settled(fake, "dmroom", [final])
    events = calls(fake, "dmroom")
    assert events[0].method == "chat post" and sum(e.method == "edit" for e in events) >= 3
    assert all(b.text.startswith(a.text) for a, b in itertools.pairwise(events))
    assert events[-1].text == final and not fake.posted  # nothing through the bot API
    assert min(b.at - a.at for a, b in itertools.pairwise(events)) >= MIN_GAP
    await counted_streamed(adapter)
    assert [m.text for m in gw.inbound] == ["tell me"]  # its own post, echoed back by Talk, is no turn


async def test_a_group_reply_quotes_the_question_once(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, client = await rig()
    gw.script = words(60)
    await fake.say(client, room="team", user="bob", text="@kith go", url=HOOK, message_id=77)
    await settled(fake, "team", ["".join(gw.script).strip()])
    first, *edits = calls(fake, "team")
    assert (first.method, first.reply_to) == ("chat post", 77) and all(e.method == "edit" for e in edits)


async def test_a_429_on_an_edit_is_honoured(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter, client = await rig()
    gw.script = words(150)
    gw.gap = 0.01  # 1.5 s of model: the stream goes on past the pause
    await fake.say(client, room="dmroom", user="ada", text="go", url=HOOK)
    deadline = asyncio.get_running_loop().time() + 10
    while not any(e.method == "edit" for e in fake.timeline):
        assert asyncio.get_running_loop().time() < deadline, "no edit came"
        await asyncio.sleep(0.005)
    fake.throttle_chat = 1  # Retry-After: 1
    final = "".join(gw.script).strip()
    await settled(fake, "dmroom", [final])
    events = calls(fake, "dmroom")
    refused = next(i for i, e in enumerate(events) if e.method.startswith("429"))
    assert events[refused + 1].at - events[refused].at >= 1.0 - SLACK  # nothing before Retry-After
    assert events[-1].text == final and sum(e.method == "edit" for e in events) >= 3


async def test_without_edit_messages_the_reply_goes_out_whole_by_the_bot(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter, client = await rig()
    fake.features.remove("edit-messages")
    gw.script = words(60)
    await fake.say(client, room="dmroom", user="ada", text="whole", url=HOOK)
    final = "".join(gw.script).strip()
    await settled(fake, "dmroom", [final])
    assert [e.method for e in calls(fake, "dmroom")] == ["bot post"] and adapter.stats["streamed"] == 0


async def test_streaming_off_sends_by_the_bot_and_is_the_default(rig) -> None:  # type: ignore[no-untyped-def]
    from adapters.nextcloud_config import NextcloudConfig

    assert NextcloudConfig().stream is False  # it changes who the reply is from: asked for, never assumed
    fake, gw, _adapter, client = await rig(stream=False)
    gw.script = words(60)
    await fake.say(client, room="dmroom", user="ada", text="whole", url=HOOK)
    await settled(fake, "dmroom", ["".join(gw.script).strip()])
    assert [e.method for e in calls(fake, "dmroom")] == ["bot post"]


async def test_edits_failing_midway_leave_no_partial_message(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter, client = await rig()
    fake.refuse_edits = 1000
    gw.script = words(80)
    await fake.say(client, room="dmroom", user="ada", text="go", url=HOOK)
    final = "".join(gw.script).strip()
    await settled(fake, "dmroom", [final])
    methods = [e.method for e in calls(fake, "dmroom")]
    assert methods[0] == "chat post" and methods[-2:] == ["delete", "bot post"] and "400 edit" in methods
    assert adapter.stats["streamed"] == 0


def test_streaming_without_the_api_user_is_a_config_problem() -> None:
    from adapters.nextcloud_config import NextcloudConfig

    cfg = NextcloudConfig(enabled=True, base_url="https://cloud.example.org", bot_secret="s" * 40, stream=True)
    (problem,) = cfg.problems(None, "channels.nextcloud")  # type: ignore[arg-type]
    assert "api_user" in problem
    assert not NextcloudConfig(enabled=True, base_url="https://cloud.example.org", bot_secret="s" * 40,
                               stream=True, api_user="kith", api_password="p").problems(None, "c")  # type: ignore[arg-type]
