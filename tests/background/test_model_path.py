"""Background jobs call the model through ``gateway_llm_call``, like turns do (one path for every call).

Regression: the memory writer, compaction, the sleep cycle and distillation called the provider
directly, so a plugin overriding ``gateway_llm_call`` (a router, a cost meter) never saw them.
"""

from __future__ import annotations

from typing import Any

from gateway.hookspecs import hookimpl
from gateway.types import LLMRequest, LLMResponse, Turn
from tests.background.conftest import BgFactory, msg, say, user_id
from tests.background.test_writer import WRITER_OK, slot_files
from tests.storage import select_one


class Meter:
    """A cost-meter-like plugin: sees every call, answers none of them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (kind, role, first system source)

    @hookimpl(tryfirst=True)
    async def gateway_llm_call(self, turn: Turn | None, request: LLMRequest) -> LLMResponse | None:
        kind = "turn" if turn is not None else "background"
        self.calls.append((kind, request.role, request.system[0].source if request.system else ""))
        return None


class Router:
    """A plugin that answers background calls itself (e.g. routes them to another model)."""

    @hookimpl(tryfirst=True)
    async def gateway_llm_call(self, turn: Turn | None, request: LLMRequest) -> LLMResponse | None:
        if turn is not None:
            return None
        return LLMResponse(text=WRITER_OK, model="router")


async def test_memory_writer_call_goes_through_the_hook(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    meter = Meter()
    gw = await bg_gateway(background={"writer": {"turn_threshold": 2}}, plugins=(meter,))
    fake_anthropic.enqueue("reply one")
    fake_anthropic.enqueue("reply two")
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")
    await say(gw, "I'm moving to Munich in June.", "Looking at flats near the Isar.")
    await gw.settle()
    assert [c for c in meter.calls if c[0] == "turn"], meter.calls
    background = [c for c in meter.calls if c[0] == "background"]
    assert background and background[0][2] == "memory_writer", meter.calls
    assert slot_files(gw, user_id(gw))


async def test_a_plugin_can_answer_background_calls(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    gw = await bg_gateway(background={"writer": {"turn_threshold": 2}}, plugins=(Router(),))
    fake_anthropic.enqueue("reply one")
    fake_anthropic.enqueue("reply two")
    await say(gw, "I'm moving to Munich in June.", "Looking at flats near the Isar.")
    await gw.settle()
    [slot] = slot_files(gw, user_id(gw))
    assert "Munich in June" in gw.memory_store(user_id(gw)).read(slot)
    assert len(fake_anthropic.requests) == 2  # only the two turns: the writer's call never reached the provider


async def test_a_background_job_never_takes_a_chat_turns_answer(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    """The fake model answers by what it is asked (tests/fakes/kinds.py): an answer queued for the next
    chat turn stays there while a memory writer job asks the model in between. With one shared queue
    the writer took it (as it did after ``/new`` in the web chat test), failed to parse it and retried,
    and the chat turn got the fake's echo instead: tests passed or failed by timing."""
    gw = await bg_gateway()
    await say(gw, "Zebras migrate with the rains.")
    await gw.settle()
    sid = select_one(gw.state, "SELECT session_id FROM sessions")[0]
    fake_anthropic.enqueue("The next chat answer.")  # for the next chat turn, not for the writer
    fake_anthropic.enqueue(WRITER_OK, kind="memory_writer")
    await gw.bus.enqueue("memory_writer", {"session_id": sid, "reason": "test"}, job_id=f"writer-test:{sid}")
    await gw.settle()
    assert len(fake_anthropic.requests_of("memory_writer")) == 1  # it ran once, on its own answer
    assert slot_files(gw, user_id(gw))
    reply = await gw.handle_inbound(msg("Tell me something new."))
    assert reply is not None and reply.text == "The next chat answer."
    assert not fake_anthropic.script("turn") and not fake_anthropic.script("memory_writer")
