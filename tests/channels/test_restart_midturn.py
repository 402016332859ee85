"""A watchdog restart while a turn is being answered: the turn completes and its reply arrives once.

Through the real Gateway, its supervisor and the wire-level fakes: the Anthropic fake streams a long
answer slowly, the platform goes quiet while it does, the watchdog restarts the adapter mid-turn. The
turn must still be stored whole, and the person must see the final reply exactly once, delivered by
the new run through the outbox (what was streamed before the restart stays). A real shutdown
mid-turn still ends within its bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from adapters._split import markdown_to_telegram_html
from gateway.adapter import Adapter
from gateway.hookspecs import hookimpl
from gateway.types import ConversationAddress, InboundMessage, Reply
from gateway.util.tasks import EventTasks, unless_set
from tests.channels.rig import ADA_DC, ADA_TG, Rig, start_rig, wait_for
from tests.fakes.anthropic import API_KEY, FakeAnthropic
from tests.fakes.kinds import TURN

STREAM = {"stream_interval_s": 0.05, "stream_first_chars": 20}
DM = ADA_DC + 1  # the fake's DM channel with Ada
# 8 characters a piece, one piece every 0.1 s: about 9 s of answer, far longer than a restart takes.
ANSWER = "Here is the whole plan. " + " ".join(f"step{i:03d}" for i in range(85))
CHUNK_DELAY_S = 0.1


async def slow_model() -> tuple[FakeAnthropic, dict[str, Any]]:
    fake = await FakeAnthropic().start()
    fake.chunk_delay_s = CHUNK_DELAY_S
    return fake, {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}


def assistant_rows(rig: Rig, channel: str) -> list[Any]:
    return rig.select_rows("SELECT turn_id, content FROM turns WHERE role='assistant' AND channel=?", channel)


def user_rows(rig: Rig, channel: str) -> list[Any]:
    return rig.select_rows("SELECT turn_id, content FROM turns WHERE role='user' AND channel=?", channel)


def outbox(rig: Rig) -> list[tuple[str, str, str]]:
    return [(r["delivery_id"], r["kind"], r["status"]) for r in rig.select_rows(
        "SELECT delivery_id, kind, status FROM outbox")]


async def stored_turn(rig: Rig, channel: str) -> tuple[str, str]:
    """The turn's id and stored reply, once the one assistant row of ``channel`` is there (the whole
    model answer, plus whatever a plugin appended after it)."""
    await wait_for(lambda: len(assistant_rows(rig, channel)) == 1, timeout=30, what="the turn is stored")
    ((turn_id, stored),) = assistant_rows(rig, channel)
    assert stored.startswith(ANSWER)
    return turn_id, stored


async def restart_mid_turn(rig: Rig, fake: FakeAnthropic, name: str, *, quiet: Any, speak: Any) -> None:
    """Wait until the model is answering, make the platform go quiet, wait for the watchdog's restart,
    and check the turn was still in flight then."""
    await wait_for(lambda: len(fake.requests_of(TURN)) == 1, what="the model is asked")
    before = rig.health(name)["restarts"]
    await speak()  # the stream has begun where that is awaited
    quiet(True)
    await wait_for(lambda: rig.health(name)["restarts"] > before, timeout=20, what="watchdog restart")
    assert assistant_rows(rig, name) == [], "the turn ended before the restart: the test proves nothing"
    quiet(False)


async def test_discord_restart_mid_turn_completes_the_turn_and_delivers_once(tmp_path: Path) -> None:
    fake, llm = await slow_model()
    rig = await start_rig(tmp_path, llm=llm, discord={"stall_after_s": 2, **STREAM})
    try:
        fake.enqueue(ANSWER)
        await rig.dc_say("plan my week")

        async def streaming() -> None:
            await rig.dc.wait_created(1, timeout=20)  # the first streamed message is up

        def quiet(on: bool) -> None:
            rig.dc.silent = on

        await restart_mid_turn(rig, fake, "discord", quiet=quiet, speak=streaming)

        turn_id, stored = await stored_turn(rig, "discord")
        assert [r["content"] for r in user_rows(rig, "discord")] == ["plan my week"]
        await wait_for(lambda: stored in rig.dc.shown(DM), timeout=30, what="the reply reaches the DM")
        await wait_for(lambda: outbox(rig) == [(f"reply:{turn_id}", "reply", "sent")], what="the outbox row is sent")
        await rig.gw.settle()
        # Exactly once: the streamed message stays as it was when the old run went, the whole reply
        # follows it once, posted by the new run.
        partial, whole = rig.dc.shown(DM)
        assert whole == stored and len(partial) < len(ANSWER) and partial[:20] == ANSWER[:20]
        assert sum(c.content == stored for c in rig.dc.created) == 1
        assert rig.health("discord")["state"] == "running"
    finally:
        await rig.stop()
        await fake.stop()


async def test_telegram_restart_mid_turn_completes_the_turn_and_delivers_once(tmp_path: Path) -> None:
    fake, llm = await slow_model()
    rig = await start_rig(tmp_path, llm=llm, telegram={"stall_after_s": 1.5, **STREAM})
    try:
        fake.enqueue(ANSWER)
        await rig.tg_say("plan my week")

        async def nothing() -> None:
            return None

        def quiet(on: bool) -> None:
            rig.tg.stalled = on

        await restart_mid_turn(rig, fake, "telegram", quiet=quiet, speak=nothing)

        turn_id, stored = await stored_turn(rig, "telegram")
        assert [r["content"] for r in user_rows(rig, "telegram")] == ["plan my week"]
        html = markdown_to_telegram_html(stored)
        await wait_for(lambda: rig.tg.shown(ADA_TG) == [html], timeout=30, what="the reply reaches the chat")
        await rig.gw.settle()
        # The PTB handler outlives the restart (Telegram's stop() cancels nothing) and sends through
        # the new run's bot; had it failed, the outbox would have: either way, once.
        assert outbox(rig) in ([], [(f"reply:{turn_id}", "reply", "sent")])
        assert rig.tg.shown(ADA_TG) == [html]
        assert sum(s.chat_id == ADA_TG and s.text == html for s in rig.tg.sent) == 1
        assert rig.health("telegram")["state"] == "running"
    finally:
        await rig.stop()
        await fake.stop()


async def test_telegram_handler_that_cannot_send_after_a_restart_hands_the_reply_over(tmp_path: Path) -> None:
    """The handler is still there when the turn ends, but the adapter is not connected (the new run
    cannot log in yet): the gateway takes the reply and delivers it once the adapter is back."""
    fake, llm = await slow_model()
    rig = await start_rig(tmp_path, llm=llm, telegram={"stall_after_s": 1.5, **STREAM})
    get_me = rig.tg._m_getMe

    async def bad_gateway(_: dict[str, Any]) -> web.Response:
        return rig.tg._error(502, "Bad Gateway")

    try:
        fake.enqueue(ANSWER)
        await rig.tg_say("plan my week")

        async def nothing() -> None:
            return None

        def quiet(on: bool) -> None:
            rig.tg.stalled = on
            if on:  # every new run fails at getMe until the test lets it in
                rig.tg._m_getMe = bad_gateway  # type: ignore[method-assign]

        await restart_mid_turn(rig, fake, "telegram", quiet=quiet, speak=nothing)
        turn_id, stored = await stored_turn(rig, "telegram")
        await wait_for(lambda: outbox(rig) == [(f"reply:{turn_id}", "reply", "pending")], timeout=30,
                       what="the gateway holds the reply")
        assert rig.health("telegram")["state"] != "running"
        assert rig.tg.shown(ADA_TG) == []

        rig.tg._m_getMe = get_me  # type: ignore[method-assign]
        html = markdown_to_telegram_html(stored)
        await wait_for(lambda: rig.tg.shown(ADA_TG) == [html], timeout=30, what="the reply reaches the chat")
        await wait_for(lambda: outbox(rig) == [(f"reply:{turn_id}", "reply", "sent")], what="the outbox row is sent")
        await rig.gw.settle()
        assert sum(s.chat_id == ADA_TG and s.text == html for s in rig.tg.sent) == 1
    finally:
        rig.tg._m_getMe = get_me  # type: ignore[method-assign]
        await rig.stop()
        await fake.stop()


async def _close_within(rig: Rig, fake: FakeAnthropic, bound_s: float) -> float:
    started = time.monotonic()
    await asyncio.wait_for(rig.gw.close(), bound_s * 3)  # a hang fails here instead of hanging the suite
    took = time.monotonic() - started
    await rig.http.close()
    for platform in (rig.tg, rig.dc, rig.nc):
        await platform.close()
    await fake.stop()
    return took


async def test_shutdown_mid_turn_ends_within_its_bound(tmp_path: Path) -> None:
    fake, llm = await slow_model()
    fake.chunk_delay_s = 0.3  # the answer would take about 30 s more
    rig = await start_rig(tmp_path, llm=llm, discord=STREAM)
    fake.enqueue(ANSWER)
    await rig.dc_say("plan my week")
    await wait_for(lambda: len(fake.requests_of(TURN)) == 1, what="the model is asked")
    took = await _close_within(rig, fake, 8)
    assert took < 8, f"shutdown waited {took:.1f} s for a turn in flight"


async def test_shutdown_after_a_restart_mid_turn_ends_within_its_bound(tmp_path: Path) -> None:
    fake, llm = await slow_model()
    fake.chunk_delay_s = 0.3
    rig = await start_rig(tmp_path, llm=llm, discord={"stall_after_s": 2, **STREAM})
    fake.enqueue(ANSWER)
    await rig.dc_say("plan my week")

    async def streaming() -> None:
        await rig.dc.wait_created(1, timeout=20)

    def quiet(on: bool) -> None:
        rig.dc.silent = on

    try:
        await restart_mid_turn(rig, fake, "discord", quiet=quiet, speak=streaming)
    except BaseException:
        await _close_within(rig, fake, 8)
        raise
    # The turn goes on without its handler; shutdown cancels it and does not wait for the model.
    took = await _close_within(rig, fake, 8)
    assert took < 8, f"shutdown waited {took:.1f} s for a turn left by a restart"


class Flaky(Adapter):
    """A channel built on the public adapter API only, as a third party writes one: each message in
    a task of its own (``EventTasks``), cancelled when the run ends; ``fail`` makes the run fail."""

    name = "flaky"

    def __init__(self, gateway: Any, config: Any = None) -> None:
        super().__init__(gateway, config)
        self.inbox: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self.fail = asyncio.Event()
        self.runs = 0
        self.delivered: list[tuple[str, str]] = []  # (how, text)

    async def run(self) -> None:
        self.runs += 1
        tasks = EventTasks(logging.getLogger("flaky"), "flaky: a message")
        self.mark_connected()
        try:
            while True:
                message = await unless_set(self.inbox.get(), self.fail)
                if message is None:
                    self.fail.clear()
                    raise ConnectionError("the platform went away")
                tasks.spawn(self._answer(message))
        finally:
            await tasks.cancel_all()

    async def _answer(self, message: InboundMessage) -> None:
        reply = await self.gateway.handle_inbound(message)
        if reply is not None:
            self.delivered.append(("handler", reply.text))

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        self.delivered.append(("send", reply.text))


class FlakyChannel:
    __name__ = "flaky_channel"

    @hookimpl
    def gateway_register_adapters(self, register: Any) -> None:
        register(Flaky)


async def test_a_run_that_fails_mid_turn_is_retried_and_the_turn_still_lands(tmp_path: Path) -> None:
    fake, llm = await slow_model()
    rig = await start_rig(tmp_path, llm=llm, plugins=(FlakyChannel(),))
    try:
        flaky = rig.gw.adapters["flaky"]
        assert isinstance(flaky, Flaky)
        await wait_for(lambda: rig.health("flaky")["state"] == "running", what="flaky serves")
        fake.enqueue(ANSWER, delay_s=6)  # no deltas asked for: the answer comes whole, after a pause
        await flaky.inbox.put(InboundMessage(channel="flaky", account_id="ada", conversation_id="ada",
                                             text="plan my week", message_id="m1", trusted=True))
        await wait_for(lambda: len(fake.requests_of(TURN)) == 1, what="the model is asked")
        flaky.fail.set()  # the run fails; its cleanup cancels the message's task
        await wait_for(lambda: flaky.runs >= 2 and rig.health("flaky")["state"] == "running", what="a new run")
        assert assistant_rows(rig, "flaky") == []

        turn_id, stored = await stored_turn(rig, "flaky")
        await wait_for(lambda: flaky.delivered != [], timeout=30, what="the reply is delivered")
        await wait_for(lambda: outbox(rig) == [(f"reply:{turn_id}", "reply", "sent")], what="the outbox row is sent")
        await rig.gw.settle()
        assert flaky.delivered == [("send", stored)]
        assert [r["content"] for r in user_rows(rig, "flaky")] == ["plan my week"]
    finally:
        await rig.stop()
        await fake.stop()
