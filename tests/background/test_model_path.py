"""Background jobs call the model through ``gateway_llm_call``, like turns do (one path for every call).

Regression: the memory writer, compaction, the sleep cycle and distillation called the provider
directly, so a plugin overriding ``gateway_llm_call`` (a router, a cost meter) never saw them.
"""

from __future__ import annotations

from typing import Any

from gateway.hookspecs import hookimpl
from gateway.types import LLMRequest, LLMResponse, Turn
from tests.background.conftest import BgFactory, say, user_id
from tests.background.test_writer import WRITER_OK, slot_files


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
    fake_anthropic.enqueue(WRITER_OK)
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
