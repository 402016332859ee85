"""The model's tool loop through the real ``anthropic`` client against the fake Messages API.

A scripted ``tool_use`` answer, then text: the host runs the tool, sends its ``tool_result`` back with
the ids the API requires, and the reply is the model's final text, streamed (SSE) or not (JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolContext, ToolError
from gateway.types import ConversationKind, InboundMessage, ToolCall, Turn
from tests.conftest import GatewayFactory, WSClient
from tests.fakes.anthropic import FakeAnthropic
from tests.storage import select_rows

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


class WeatherTools:
    """A third-party plugin: one read-only public tool, one that writes, one that fails."""

    __name__ = "weather_tools"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.vetoed: list[str] = []

    async def weather(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        self.calls.append(("weather", dict(args)))
        if args["city"] == "Atlantis":
            raise ToolError("no such city")
        return f"Sunny in {args['city']}, 21 C (asked by {ctx.user_id}, tier {ctx.tier})"

    def broken(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        raise RuntimeError("secret internals")

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        register(Tool(name="weather", description="Current weather for a city.", input_schema=WEATHER_SCHEMA,
                      handler=self.weather, private=False))
        register(Tool(name="broken", description="Always fails.", input_schema={"type": "object"},
                      handler=self.broken, private=False, min_tier=3))

    @hookimpl
    def gateway_before_tool_call(self, turn: Turn, call: ToolCall) -> str | None:
        if call.input.get("city") == "Mordor":
            self.vetoed.append(call.name)
            return "the operator does not allow weather lookups for Mordor"
        return None


def msg(text: str, **kw: Any) -> InboundMessage:
    return InboundMessage(channel="websocket", account_id="me", conversation_id="me", text=text, trusted=True, **kw)


async def test_tool_use_then_text_non_streaming(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                                anthropic_llm: dict[str, Any]) -> None:
    plugin = WeatherTools()
    gw = await make_gateway(plugins=(plugin,), llm=anthropic_llm)
    (tool_id,) = fake_anthropic.enqueue_tool_use("weather", {"city": "Lisbon"}, text="Let me look.")
    fake_anthropic.enqueue("It is sunny in Lisbon.")
    reply = await gw.handle_inbound(msg("weather in Lisbon?"))
    assert reply is not None and reply.text == "Let me look.\n\nIt is sunny in Lisbon."
    assert plugin.calls == [("weather", {"city": "Lisbon"})]
    assert len(fake_anthropic.requests) == 2
    first, second = fake_anthropic.requests
    assert "weather" in [t["name"] for t in first["tools"]]
    assert first["tools"] == second["tools"], "the tool list is identical across rounds (prompt cache)"
    assert second["messages"][-2]["role"] == "assistant"
    assert second["messages"][-2]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": tool_id, "name": "weather", "input": {"city": "Lisbon"}},
    ]
    (result,) = fake_anthropic.tool_results()
    assert result["tool_use_id"] == tool_id and "Sunny in Lisbon" in result["content"]
    assert "tier 2" in result["content"] and "is_error" not in result
    assert second["system"] == first["system"], "the system prompt is not rebuilt between rounds"
    # the transcript holds the exchange as the user saw it, not the tool plumbing
    rows = select_rows(gw.state, "SELECT role, content FROM turns ORDER BY rowid")
    assert [r["content"] for r in rows] == ["weather in Lisbon?", "Let me look.\n\nIt is sunny in Lisbon."]


async def test_tool_use_then_text_streaming(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                            anthropic_llm: dict[str, Any], ws_connect: Any) -> None:
    plugin = WeatherTools()
    gw = await make_gateway(plugins=(plugin,), llm=anthropic_llm)
    fake_anthropic.enqueue_tool_use("weather", {"city": "Porto, the city of bridges"}, text="Checking.")
    fake_anthropic.enqueue("Porto is sunny.")
    client: WSClient = await ws_connect(gw)
    await client.hello("c1")
    frame, deltas = await client.ask("and Porto?")
    assert frame["text"] == "Checking.\n\nPorto is sunny."
    assert "".join(deltas) == frame["text"], "the stream shows exactly the reply, paragraph break included"
    assert all(r["stream"] for r in fake_anthropic.requests)
    # the tool input arrived in partial JSON pieces over SSE and was reassembled by the client
    assert plugin.calls == [("weather", {"city": "Porto, the city of bridges"})]


async def test_errors_vetoes_and_unknown_tools_reach_the_model_not_the_user(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    plugin = WeatherTools()
    gw = await make_gateway(plugins=(plugin,), llm=anthropic_llm, context={"default_tier": 3})
    fake_anthropic.enqueue_tool_use("weather", {"city": "Atlantis"}, more=(
        ("weather", {"city": "Mordor"}), ("broken", {}), ("weather", {}), ("memory_wipe", {"all": True})))
    fake_anthropic.enqueue("Sorry, none of that worked.")
    reply = await gw.handle_inbound(msg("try things"))
    assert reply is not None and reply.text == "Sorry, none of that worked."
    results = fake_anthropic.tool_results()
    assert [r.get("is_error") for r in results] == [True] * 5
    contents = [r["content"] for r in results]
    assert contents[0] == "no such city"
    assert "does not allow weather lookups for Mordor" in contents[1] and plugin.vetoed == ["weather"]
    assert contents[2] == "broken failed; the error is logged" and "secret" not in contents[2]
    assert contents[3] == "missing required input: city"
    assert contents[4].startswith("unknown tool 'memory_wipe'")
    assert plugin.calls == [("weather", {"city": "Atlantis"})], "vetoed and invalid calls never ran"


async def test_tool_rounds_are_bounded(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                       anthropic_llm: dict[str, Any]) -> None:
    plugin = WeatherTools()
    gw = await make_gateway(plugins=(plugin,), llm={**anthropic_llm, "max_tool_rounds": 2})
    for i in range(5):
        fake_anthropic.enqueue_tool_use("weather", {"city": f"City {i}"})
    reply = await gw.handle_inbound(msg("loop forever"))
    assert reply is not None
    assert len(fake_anthropic.requests) == 3, "two tool rounds, then one call that may not use tools"
    assert [r.get("tool_choice") for r in fake_anthropic.requests] == [None, None, {"type": "none"}]
    assert len(plugin.calls) == 2


@pytest.mark.parametrize("tier, kind, expected", [
    (1, ConversationKind.DM, None),
    (2, ConversationKind.DM, ["weather"]),
    (3, ConversationKind.DM, ["broken", "weather"]),
])
async def test_tools_are_offered_by_tier(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                         anthropic_llm: dict[str, Any], tier: int, kind: ConversationKind,
                                         expected: list[str] | None) -> None:
    gw = await make_gateway(plugins=(WeatherTools(),), llm=anthropic_llm)
    await gw.handle_inbound(msg("hi", raw={"tier": tier}))
    tools = fake_anthropic.requests[-1].get("tools")
    names = [t["name"] for t in tools] if tools else None
    if expected is None:
        assert names is None or not set(names) & {"weather", "broken"}
    else:
        assert names is not None and [n for n in names if n in ("weather", "broken")] == expected


async def test_echo_provider_ignores_tools(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(plugins=(WeatherTools(),))
    reply = await gw.handle_inbound(msg("hello"))
    assert reply is not None and reply.text.startswith("echo: hello")
