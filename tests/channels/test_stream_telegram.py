"""Streaming by edits on Telegram, through python-telegram-bot against the wire fake (stub host).

The host's stand-in streams a scripted reply into ``on_delta`` the way the model call does; the fake
Bot API records every sendMessage, editMessageText, sendMessageDraft and deleteMessage with its time.
Intervals are tiny (50 ms), so the throttle is real but cheap; only the 429 test waits the one second
Telegram's integer ``retry_after`` asks for.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters._split import markdown_to_telegram_html
from adapters.telegram import TelegramAdapter
from gateway.util.text import split_text
from tests.channels.stream_stub import INTERVAL, MIN_GAP, SLACK, StreamingStub, counted_streamed, show, words
from tests.channels.stub import StubGateway
from tests.fakes.telegram_api import Event, FakeTelegram

TOKEN = "123456:TEST-token"


@pytest.fixture
async def rig(tmp_path: Any) -> AsyncIterator[tuple[FakeTelegram, StreamingStub, TelegramAdapter]]:
    async def make(**channel: Any) -> tuple[FakeTelegram, StreamingStub, TelegramAdapter]:
        fake = await stack.enter_async_context(FakeTelegram(token=TOKEN))
        cfg = {"enabled": True, "token": TOKEN, "base_url": fake.base_url, "poll_timeout_s": 1,
               "send_rate_per_s": 1000, "send_burst": 1000, "stream_interval_s": INTERVAL,
               "stream_first_chars": 20, "stream_drafts": False, **channel}
        gw = StreamingStub(StubGateway.with_channels(tmp_path, telegram=cfg).config)
        await stack.enter_async_context(gw)
        adapter = TelegramAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        return fake, gw, adapter

    import contextlib

    async with contextlib.AsyncExitStack() as stack:
        yield make  # type: ignore[misc]


def calls(fake: FakeTelegram, chat_id: int) -> list[Event]:
    return [e for e in fake.timeline if e.chat_id == chat_id]


async def settled(fake: FakeTelegram, chat_id: int, expected: list[str], timeout: float = 15.0) -> None:
    """Wait (bounded) until the chat shows ``expected``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while fake.shown(chat_id) != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the chat shows {fake.shown(chat_id)!r}")
        await asyncio.sleep(0.02)


async def test_a_reply_appears_and_grows_by_throttled_edits(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = await rig(parse_mode="plain")
    gw.script = words(120)  # ~0.5 s of model, 20 pieces per interval
    await fake.push(fake.make_update(user_id=42, text="tell me"))
    final = "".join(gw.script).strip()
    await settled(fake, 42, [final])
    events = calls(fake, 42)
    print("\n" + show(events, events[0].at))
    assert events[0].method == "sendMessage"
    edits = [e for e in events if e.method == "editMessageText"]
    assert len(edits) >= 3 and len(fake.sent) == 1  # one message, grown by edits
    texts = [e.text for e in events]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    assert events[-1].text == final
    gaps = [b.at - a.at for a, b in itertools.pairwise(events)]
    assert min(gaps) >= MIN_GAP, gaps
    await counted_streamed(adapter)
    assert fake.not_modified == 0


async def test_the_final_edit_carries_the_rendered_final_text(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig()
    gw.script = ["Here is **the** plan:\n", *words(40), "\n\n`done` <ok>"]
    await fake.push(fake.make_update(user_id=43, text="plan?"))
    final = "".join(gw.script).strip()
    await settled(fake, 43, [markdown_to_telegram_html(final)])
    assert calls(fake, 43)[-1].text == markdown_to_telegram_html(final)


async def test_a_429_on_an_edit_is_honoured(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(parse_mode="plain")
    fake.throttle = {"editMessageText": 1}
    fake.retry_after = 1
    gw.script = words(150)
    gw.gap = 0.01  # 1.5 s of model: the stream goes on past the pause
    await fake.push(fake.make_update(user_id=44, text="go"))
    final = "".join(gw.script).strip()
    await settled(fake, 44, [final])
    events = calls(fake, 44)
    print("\n" + show(events, events[0].at))
    refused = next(i for i, e in enumerate(events) if e.method.startswith("429"))
    assert events[refused + 1].at - events[refused].at >= 1.0 - SLACK  # nothing before retry_after
    assert events[-1].text == final and sum(e.method == "editMessageText" for e in events) >= 3


async def test_a_9000_character_reply_ends_as_correctly_split_messages(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(parse_mode="plain")
    lines = [f"line {i:04d} " + "z" * (40 + i % 23) + "\n" for i in range(160)]
    gw.script = [line[j : j + 16] for line in lines for j in range(0, len(line), 16)]
    gw.gap = 0.001
    text = "".join(lines)
    assert len(text) > 9000
    await fake.push(fake.make_update(user_id=-100, chat_id=-100, text="@kith_test_bot long one"))
    expected = split_text(text, 4096)
    assert len(expected) == 3
    await settled(fake, -100, expected)
    events = calls(fake, -100)
    print("\n" + show(events, events[0].at))
    # a sealed message is never edited again: each message's edits come before the next one starts
    firsts = {}
    for i, e in enumerate(events):
        firsts.setdefault(e.message_id, i)
    for e_index, e in enumerate(events):
        later = [mid for mid, first in firsts.items() if first < e_index and mid > e.message_id]
        assert not later, f"message {e.message_id} edited after message {later} started"
    assert all(len(e.text) <= 4096 for e in events)
    assert fake.sent[0].reply_to is not None and all(s.reply_to is None for s in fake.sent[1:])
    assert not any(e.method == "deleteMessage" for e in events)


async def test_drafts_in_a_private_chat_then_one_kept_message(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(parse_mode="plain", stream_drafts=True)
    gw.script = words(100)
    await fake.push(fake.make_update(user_id=45, text="draft it"))
    final = "".join(gw.script).strip()
    await settled(fake, 45, [final])
    events = calls(fake, 45)
    print("\n" + show(events, events[0].at))
    drafts = [e for e in events if e.method == "sendMessageDraft"]
    assert len(drafts) >= 3 and len({e.message_id for e in drafts}) == 1
    assert events[-1].method == "sendMessage" and events[-1].text == final
    assert not any(e.method == "editMessageText" for e in events)


async def test_drafts_refused_fall_back_to_edits(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = await rig(parse_mode="plain", stream_drafts=True)

    async def no_drafts(_params: dict[str, Any]) -> Any:
        return fake._error(404, "Not Found: method not found")

    fake._m_sendMessageDraft = no_drafts  # type: ignore[method-assign]  # an older Bot API server
    gw.script = words(60)
    await fake.push(fake.make_update(user_id=46, text="one"))
    final = "".join(gw.script).strip()
    await settled(fake, 46, [final])  # the first reply went out whole
    await fake.push(fake.make_update(user_id=46, text="two"))
    await settled(fake, 46, [final, final])
    assert sum(e.method == "editMessageText" for e in calls(fake, 46)) >= 3  # the second one streamed by edits
    assert not adapter._drafts_ok


async def test_streaming_off_sends_one_message(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(parse_mode="plain", stream=False)
    gw.script = words(80)
    await fake.push(fake.make_update(user_id=47, text="whole"))
    final = "".join(gw.script).strip()
    await settled(fake, 47, [final])
    assert [e.method for e in calls(fake, 47)] == ["sendMessage"]


async def test_a_reply_replaced_after_the_stream_is_exact(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(parse_mode="plain")
    gw.script = words(60)
    gw.final = "Something went wrong while answering; the error is logged. Please try again."
    await fake.push(fake.make_update(user_id=48, text="boom"))
    await settled(fake, 48, [gw.final])
    assert calls(fake, 48)[-1].text == gw.final


async def test_edits_refused_midway_leave_no_partial_message_above_the_whole_reply(rig) -> None:  # type: ignore[no-untyped-def]
    """Telegram stops taking edits of the message in progress: the partial message is deleted and the
    reply arrives whole, once."""
    fake, gw, adapter = await rig(parse_mode="plain")
    fake.refuse = {"editMessageText": 1000}
    gw.script = words(80)
    await fake.push(fake.make_update(user_id=49, text="go"))
    final = "".join(gw.script).strip()
    await settled(fake, 49, [final])
    events = calls(fake, 49)
    print("\n" + show(events, events[0].at))
    methods = [e.method for e in events]
    assert methods.count("sendMessage") == 2 and "deleteMessage" in methods
    assert methods.index("deleteMessage") < len(methods) - 1 and methods[-1] == "sendMessage"
    assert adapter.stats["streamed"] == 0


async def test_an_edit_refused_once_midway_is_finished_in_place(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = await rig(parse_mode="plain")
    fake.refuse = {"editMessageText": 1}
    gw.script = words(80)
    await fake.push(fake.make_update(user_id=50, text="go"))
    final = "".join(gw.script).strip()
    await settled(fake, 50, [final])
    methods = [e.method for e in calls(fake, 50)]
    assert methods.count("sendMessage") == 1 and "deleteMessage" not in methods
    assert methods[-1] == "editMessageText"
    await counted_streamed(adapter)
