"""Streaming by edits on Matrix (``m.replace``), through mautrix against the homeserver fake (stub host)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("mautrix")

from adapters.matrix import MatrixAdapter
from gateway.util.text import split_text
from tests.channels.stream_stub import INTERVAL, MIN_GAP, SLACK, StreamingStub, counted_streamed, words
from tests.channels.stub import StubGateway
from tests.fakes.matrix_hs import FakeHomeserver

TOKEN = "syt_kith_test_token"
ADA = "@ada:fake.test"
DM = "!dm:fake.test"


@pytest.fixture
async def rig(tmp_path: Any) -> AsyncIterator[Any]:
    async def make(**channel: Any) -> tuple[FakeHomeserver, StreamingStub, MatrixAdapter]:
        fake = await stack.enter_async_context(FakeHomeserver(token=TOKEN))
        await fake.direct({ADA: [DM]})
        cfg = {"enabled": True, "homeserver": fake.base_url, "access_token": TOKEN, "sync_timeout_s": 1,
               "send_rate_per_s": 1000, "send_burst": 1000, "stream_interval_s": INTERVAL,
               "stream_first_chars": 20, **channel}
        gw = StreamingStub(StubGateway.with_channels(tmp_path, matrix=cfg).config)
        await stack.enter_async_context(gw)
        adapter = MatrixAdapter(gw)  # type: ignore[arg-type]
        gw.start(adapter)
        await asyncio.wait_for(adapter.ready.wait(), 10)
        return fake, gw, adapter

    async with contextlib.AsyncExitStack() as stack:
        yield make


async def settled(fake: FakeHomeserver, room: str, expected: list[str], timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while fake.shown(room) != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the room shows {fake.shown(room)!r}")
        await asyncio.sleep(0.02)


async def test_a_reply_grows_by_replacements(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, adapter = await rig()
    gw.script = words(120)
    await fake.say(DM, ADA, "tell me")
    final = "".join(gw.script).strip()
    await settled(fake, DM, [final])
    sent = [s for s in fake.sent if s["room"] == DM]
    first, edits = sent[0], sent[1:]
    assert "m.relates_to" not in first["content"] and len(edits) >= 3
    assert all(e["content"]["m.relates_to"] == {"rel_type": "m.replace", "event_id": first["event_id"]}
               for e in edits)
    assert edits[-1]["content"]["body"] == f"* {final}" and edits[-1]["content"]["m.new_content"]["body"] == final
    assert min(b["at"] - a["at"] for a, b in itertools.pairwise(sent)) >= MIN_GAP
    await counted_streamed(adapter)
    assert len(gw.inbound) == 1  # our own edits came back: no turns


async def test_a_429_is_waited_out(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig()
    gw.script = words(150)
    gw.gap = 0.01
    await fake.say(DM, ADA, "go")
    await fake.wait_sent(1)  # the first message goes through; the next send (an edit) is refused
    fake.throttle_next = 1
    final = "".join(gw.script).strip()
    await settled(fake, DM, [final])
    (refused,) = fake.refused
    after = [s["at"] for s in fake.sent if s["at"] > refused]
    assert after and after[0] - refused >= 1.0 - SLACK  # mautrix gives no retry_after_ms: a second


async def test_a_long_reply_splits_stably(rig) -> None:  # type: ignore[no-untyped-def]
    fake, gw, _adapter = await rig(max_body_chars=300)
    text = " ".join(f"w{i:04d}" for i in range(200))
    gw.script = [text[i : i + 13] for i in range(0, len(text), 13)]
    gw.gap = 0.002
    await fake.say(DM, ADA, "long")
    await settled(fake, DM, split_text(text, 300))
    assert not fake.redacted


async def test_typing_is_renewed_while_a_long_turn_runs(rig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import adapters.matrix

    monkeypatch.setattr(adapters.matrix, "_TYPING_MS", 200)  # renewed every 160 ms instead of every 24 s
    fake, gw, _adapter = await rig(stream=False)
    gw.script = ["thinking..."] * 25
    gw.gap = 0.05  # a turn of 1.25 s: typing starts after 0.8 s
    await fake.say(DM, ADA, "think hard")
    await fake.wait_sent(1)
    shown = [on for room, on in fake.typing if room == DM]
    assert shown.count(True) >= 2 and shown[-1] is False  # renewed, then cleared when the answer came
