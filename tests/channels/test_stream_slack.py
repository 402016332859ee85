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
from gateway.types import Reply
from tests.channels.stream_stub import INTERVAL, MIN_GAP, SLACK, StreamingStub, counted_streamed, words
from tests.channels.stub import StubGateway
from tests.fakes.slack_api import FakeSlack

BOT_TOKEN = "xoxb-kith-test"
APP_TOKEN = "xapp-kith-test"
ADA = "UADA"


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
    assert min(b["at"] - a["at"] for a, b in itertools.pairwise(calls)) >= MIN_GAP
    await counted_streamed(adapter)


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


async def test_confirmation_buttons_in_block_kit(rig) -> None:  # type: ignore[no-untyped-def]
    """A /link confirmation carries Block Kit buttons; a stranger's press is told so (ephemerally) and
    changes nothing; the person's press sends the command as them and takes the buttons away."""
    fake, gw, adapter = await rig()
    gw.final = ("That code belongs to ada on telegram. ... reply `/link confirm AB2C` here within 9 minutes. "
                "If you don't know that account, reply `/link cancel`.")
    gw.notice = True
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="/link 7XK2-PQ9M"))
    (asked,) = await fake.wait_posted(1)
    actions = next(b for b in asked["blocks"] if b["type"] == "actions")["elements"]
    labels = {e["text"]["text"]: e["action_id"] for e in actions}
    assert list(labels) == ["Confirm link", "Cancel"] and "AB2C" not in "".join(labels.values())
    assert asked["blocks"][0]["text"]["text"] == asked["text"]  # the text shows above the buttons

    gw.final, gw.notice = "Confirmed here.", True
    await fake.press(user="UEVE", posted=asked, action_id=labels["Confirm link"])
    await fake.press(user=ADA, posted=asked, action_id=labels["Confirm link"])
    await fake.wait_posted(2)
    assert [m.text for m in gw.inbound] == ["/link 7XK2-PQ9M", "/link confirm AB2C"]
    assert gw.inbound[1].account_id == ADA and gw.inbound[1].conversation_id == "DADA"
    assert [(e["user"], e["text"]) for e in fake.ephemeral] == [("UEVE", "This button is not for you.")]
    update = next(c for c in fake.timeline if c["method"] == "chat.update" and c["ts"] == asked["ts"])
    assert [b["type"] for b in update["blocks"]] == ["section"]  # the used buttons are gone
    assert adapter.stats["buttons"] == 1


async def test_a_press_through_the_events_api_is_signed_like_any_request(tmp_path: Any) -> None:
    import json
    from urllib.parse import urlencode

    import aiohttp

    secret = "8f742231b10e8888abcd99yyyzzz85a5"
    async with FakeSlack(bot_token=BOT_TOKEN, app_token=APP_TOKEN) as fake:
        cfg = {"enabled": True, "bot_token": BOT_TOKEN, "signing_secret": secret, "mode": "events",
               "api_base": fake.api_base, "send_rate_per_s": 1000, "send_burst": 1000}
        async with StreamingStub(StubGateway.with_channels(tmp_path, slack=cfg).config) as gw:
            adapter = SlackAdapter(gw)  # type: ignore[arg-type]
            client = await gw.mount(adapter)
            gw.start(adapter)
            await asyncio.wait_for(adapter.ready.wait(), 10)
            (offer,) = adapter._offer(Reply(text="Reply /forget confirm to remove exactly this.", notice=True),
                                      "DADA", ADA)
            payload = {"type": "block_actions", "user": {"id": ADA}, "channel": {"id": "DADA"},
                       "container": {"message_ts": "1.000001"}, "trigger_id": "trig1",
                       "actions": [{"action_id": offer.token, "value": "press"}]}
            body = urlencode({"payload": json.dumps(payload)}).encode()
            url = str(client.make_url("/slack/events"))
            form = "application/x-www-form-urlencoded"
            async with aiohttp.ClientSession() as http:
                forged = await fake.signed_post(http, url, body, secret="wrong", content_type=form)
                assert forged.status == 401 and not gw.inbound
                ok = await fake.signed_post(http, url, body, secret=secret, content_type=form)
                assert ok.status == 200
            (msg,) = await gw.wait_inbound(1)
            assert (msg.text, msg.account_id, msg.conversation_id) == ("/forget confirm", ADA, "DADA")


async def test_updates_refused_midway_leave_no_partial_message_above_the_whole_reply(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = await rig()
    fake.refuse_updates = 1000
    gw.script = words(80)
    await fake.push_event(fake.message(user=ADA, channel="DADA", text="go"))
    final = to_mrkdwn("".join(gw.script).strip())
    await settled(fake, [final])
    methods = [c["method"] for c in fake.timeline]
    assert methods.count("chat.postMessage") == 2 and methods.count("chat.delete") == 1
    assert methods[-1] == "chat.postMessage" and adapter.stats["streamed"] == 0
