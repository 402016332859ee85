"""Streaming by edits on Slack (``chat.update``), through slack-sdk against the Web API fake (stub host)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("slack_sdk")

from adapters.slack import SlackAdapter, to_mrkdwn
from tests.channels.stream_stub import StreamingStub, words
from tests.channels.stub import StubGateway
from tests.fakes.slack_api import FakeSlack

BOT_TOKEN = "xoxb-kith-test"
APP_TOKEN = "xapp-kith-test"
ADA = "UADA"
INTERVAL = 0.05
SLACK = 0.01


@pytest.fixture
async def rig(tmp_path: Any) -> AsyncIterator[Any]:
    async def make(**channel: Any) -> tuple[FakeSlack, StreamingStub, SlackAdapter]:
        fake = await stack.enter_async_context(FakeSlack(bot_token=BOT_TOKEN, app_token=APP_TOKEN))
        cfg = {"enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "api_base": fake.api_base,
               "send_rate_per_s": 1000, "send_burst": 1000, "stream_interval_s": INTERVAL,
               "stream_first_chars": 20, **channel}
        gw = StreamingStub(StubGateway.with_channels(tmp_path, slack=cfg).config)
        await stack.enter_async_context(gw)
        adapter = SlackAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        return fake, gw, adapter

    async with contextlib.AsyncExitStack() as stack:
        yield make


async def settled(fake: FakeSlack, expected: list[str], timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while fake.shown() != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"Slack shows {fake.shown()!r}")
        await asyncio.sleep(0.02)


async def test_a_reply_grows_by_chat_update(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = await rig()
    gw.script = ["Here **is** <it>: ", *words(100)]
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="tell me"))
    final = to_mrkdwn("".join(gw.script).strip())
    await settled(fake, [final])
    calls = fake.timeline
    assert calls[0]["method"] == "chat.postMessage" and sum(c["method"] == "chat.update" for c in calls) >= 3
    assert calls[-1]["text"] == final
    assert min(b["at"] - a["at"] for a, b in itertools.pairwise(calls)) >= INTERVAL - SLACK
    assert adapter.stats["streamed"] == 1


async def test_a_429_on_chat_update_is_honoured(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig()
    fake.throttle_updates = 1  # Retry-After: 1
    gw.script = words(150)
    gw.gap = 0.01
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="go"))
    final = to_mrkdwn("".join(gw.script).strip())
    await settled(fake, [final])
    calls = fake.timeline
    refused = next(i for i, c in enumerate(calls) if c["method"].startswith("429"))
    assert calls[refused + 1]["at"] - calls[refused]["at"] >= 1.0 - SLACK


async def test_streaming_off_posts_the_reply_once(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(stream=False)
    gw.script = words(60)
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="whole"))
    await settled(fake, ["".join(gw.script).strip()])
    assert [c["method"] for c in fake.timeline] == ["chat.postMessage"]
