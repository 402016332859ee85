"""The ``openai`` provider on the real gateway: a WebSocket person's turn streams, a registered tool is
called over two rounds with its result sent back as a ``tool`` message, and images of the current
message reach the request."""

from __future__ import annotations

from typing import Any

from gateway.hookspecs import hookimpl
from gateway.types import ImagePart, LLMRequest, Turn
from tests.conftest import GatewayFactory, WSClient
from tests.fakes.openai_server import API_KEY, FakeOpenAI
from tests.storage import select_rows
from tests.tools.test_tool_loop import WeatherTools, msg


def openai_llm(fake: FakeOpenAI) -> dict[str, Any]:
    return {"provider": "openai", "api_key": API_KEY, "base_url": fake.url, "model": "fake-gpt", "max_retries": 0,
            "timeout_s": 10}


async def test_tool_rounds_stream_to_the_websocket(make_gateway: GatewayFactory, fake_openai: FakeOpenAI,
                                                   ws_connect: Any) -> None:
    plugin = WeatherTools()
    gw = await make_gateway(plugins=(plugin,), llm=openai_llm(fake_openai))
    fake_openai.enqueue_tool_calls(("weather", {"city": "Porto, the city of bridges"}), text="Checking.")
    fake_openai.enqueue_tool_calls(("weather", {"city": "Lisbon"}))
    fake_openai.enqueue("Porto and Lisbon are sunny.")
    client: WSClient = await ws_connect(gw)
    await client.hello("c1")
    frame, deltas = await client.ask("and Porto?")
    assert frame["text"] == "Checking.\n\nPorto and Lisbon are sunny."
    assert "".join(deltas) == frame["text"]
    assert plugin.calls == [("weather", {"city": "Porto, the city of bridges"}), ("weather", {"city": "Lisbon"})]
    assert len(fake_openai.requests) == 3 and all(r["stream"] for r in fake_openai.requests)
    tool_msgs = [m for m in fake_openai.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 2 and "Sunny in Lisbon" in tool_msgs[-1]["content"]
    rows = select_rows(gw.state, "SELECT role, content FROM turns ORDER BY rowid")
    assert [r["content"] for r in rows][-1] == "Checking.\n\nPorto and Lisbon are sunny."


class AttachImage:
    """Stands in for the media plugin's one job here: images on the current message."""

    @hookimpl
    def gateway_before_llm_call(self, turn: Turn, request: LLMRequest) -> LLMRequest:
        from dataclasses import replace

        last = replace(request.messages[-1], images=(ImagePart(mime_type="image/png", data=b"\x89PNG-x"),))
        return replace(request, messages=(*request.messages[:-1], last))


async def test_current_message_images_reach_the_request(make_gateway: GatewayFactory,
                                                         fake_openai: FakeOpenAI) -> None:
    gw = await make_gateway(plugins=(AttachImage(),), llm=openai_llm(fake_openai))
    reply = await gw.handle_inbound(msg("what is this?"))
    assert reply is not None and reply.text == "fake-openai heard: what is this?"
    assert fake_openai.images(fake_openai.requests[-1]) == ["data:image/png;base64,iVBORy14"]
