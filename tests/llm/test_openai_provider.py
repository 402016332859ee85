"""The ``openai`` provider through the real ``openai`` SDK against the fake OpenAI-compatible server."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.configread import parse_config
from gateway.llm.base import LLMError, Transcriber
from gateway.llm.openai import OpenAIProvider
from gateway.types import ContextSection, HistoryMessage, ImagePart, LLMRequest, ToolCall, ToolResult, ToolSpec
from tests.fakes.openai_server import API_KEY, FakeOpenAI

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def provider(fake: FakeOpenAI, **llm: Any) -> OpenAIProvider:
    cfg = parse_config({"llm": {"provider": "openai", "api_key": API_KEY, "base_url": fake.url, "model": "fake-gpt",
                                "max_retries": 0, "timeout_s": 10, **llm}}, env={})
    return OpenAIProvider(cfg.llm)


def request(text: str = "hello", **kw: Any) -> LLMRequest:
    return LLMRequest(system=(ContextSection(source="persona", title="Persona", text="You are kith."),),
                      messages=(HistoryMessage(role="user", content=text),), **kw)


async def test_streams_deltas_and_counts_usage(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai)
    fake_openai.enqueue("The answer is forty-two, as always.")
    pieces: list[str] = []
    response = await p.complete(request(), pieces.append)
    await p.close()
    assert len(pieces) > 1 and "".join(pieces) == response.text == "The answer is forty-two, as always."
    body = fake_openai.requests[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0]["role"] == "system" and "You are kith." in body["messages"][0]["content"]
    assert response.input_tokens > 0 and response.output_tokens > 0
    assert response.provider == "openai" and response.model == "fake-gpt" and response.stop_reason == "end_turn"


async def test_whole_response_without_streaming(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai, headers={"X-Title": "kith-test"})
    response = await p.complete(request("ping"))
    await p.close()
    assert response.text == "fake-openai heard: ping" and response.input_tokens > 0
    assert "stream" not in fake_openai.requests[-1] or not fake_openai.requests[-1]["stream"]
    assert {k.lower(): v for k, v in fake_openai.headers[-1].items()}.get("x-title") == "kith-test"


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_calls_over_two_rounds(fake_openai: FakeOpenAI, stream: bool) -> None:
    p = provider(fake_openai)
    fake_openai.enqueue_tool_calls(("lookup", {"q": "weather in Munich"}), text="Let me check.")
    fake_openai.enqueue_tool_calls(("lookup", {"q": "rain"}), ("clock", {}))
    fake_openai.enqueue("Sunny, 21 degrees, no rain.")
    seen: list[ToolCall] = []

    async def run_tool(call: ToolCall) -> ToolResult:
        seen.append(call)
        return ToolResult(call_id=call.id, name=call.name, content=f"result of {call.name} {dict(call.input)}")

    tools = (ToolSpec(name="lookup", description="search", input_schema={"type": "object"}),
             ToolSpec(name="clock", description="time", input_schema={"type": "object"}))
    pieces: list[str] = []
    response = await p.complete(request("weather?", tools=tools, run_tool=run_tool, stream=stream),
                                pieces.append if stream else None)
    await p.close()
    assert [(c.name, dict(c.input)) for c in seen] == [("lookup", {"q": "weather in Munich"}),
                                                        ("lookup", {"q": "rain"}), ("clock", {})]
    assert response.rounds == 3 and len(response.tool_results) == 3
    assert response.text == "Let me check.\n\nSunny, 21 degrees, no rain."
    if stream:
        assert "".join(pieces) == response.text
    last = fake_openai.requests[-1]["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "tool"]
    assert last[-1]["content"] == "result of clock {}"
    assert fake_openai.requests[0]["tools"][0]["function"]["name"] == "lookup"


async def test_last_round_forbids_tools(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai)
    fake_openai.enqueue_tool_calls(("lookup", {}))
    fake_openai.enqueue("done")

    async def run_tool(call: ToolCall) -> ToolResult:
        return ToolResult(call_id=call.id, name=call.name, content="ok")

    tools = (ToolSpec(name="lookup", description="search", input_schema={"type": "object"}),)
    response = await p.complete(request(tools=tools, run_tool=run_tool, max_tool_rounds=1))
    await p.close()
    assert response.text == "done" and fake_openai.requests[-1]["tool_choice"] == "none"


async def test_retries_429_and_5xx_honouring_retry_after(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai, max_retries=2)
    fake_openai.enqueue_error(429, retry_after="0.01")
    fake_openai.enqueue_error(503, retry_after="0.01")
    fake_openai.enqueue("third time lucky")
    response = await p.complete(request(), [].append)
    assert response.text == "third time lucky" and len(fake_openai.requests) == 3
    fake_openai.enqueue_error(429, retry_after="0.01")
    fake_openai.enqueue_error(429, retry_after="0.01")
    fake_openai.enqueue_error(429, retry_after="0.01")
    with pytest.raises(LLMError) as err:
        await p.complete(request())
    await p.close()
    assert err.value.retryable and "rate-limited" in err.value.user_message


async def test_bad_key_is_a_clear_error(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai, api_key="wrong")
    with pytest.raises(LLMError) as err:
        await p.complete(request())
    await p.close()
    assert "API key" in err.value.user_message


async def test_images_as_data_urls(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai)
    msg = HistoryMessage(role="user", content="what is this?", images=(ImagePart(mime_type="image/png", data=PNG),))
    await p.complete(LLMRequest(system=(), messages=(msg,)))
    assert fake_openai.images(fake_openai.requests[-1]) == [f"data:image/png;base64,{base64.b64encode(PNG).decode()}"]
    blind = provider(fake_openai, capabilities={"vision": False})
    await blind.complete(LLMRequest(system=(), messages=(msg,)))
    await p.close()
    await blind.close()
    assert not fake_openai.images(fake_openai.requests[-1])
    assert "cannot see images" in fake_openai.requests[-1]["messages"][-1]["content"]


async def test_transcribe_uploads_multipart(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai, model="whisper-1")
    assert isinstance(p, Transcriber)
    fake_openai.transcript_text = "  remind me to call Bob  "
    text = await p.transcribe(b"OggS-voice", mime_type="audio/ogg", filename="voice.ogg")
    await p.close()
    assert text == "remind me to call Bob"
    [upload] = fake_openai.transcriptions
    assert upload["model"] == "whisper-1" and upload["filename"] == "voice.ogg" and upload["data"] == b"OggS-voice"


async def test_models_endpoint_through_the_sdk(fake_openai: FakeOpenAI) -> None:
    p = provider(fake_openai)
    ids = [m.id async for m in p.client.models.list()]
    await p.close()
    assert "fake-gpt" in ids


async def test_unreachable_server_is_a_retryable_error() -> None:
    gone = FakeOpenAI()
    await gone.start()
    await gone.close()  # the port was ours and is closed now
    p = provider(gone, timeout_s=3)
    with pytest.raises(LLMError) as err:
        await p.complete(request(), [].append)
    await p.close()
    assert err.value.retryable
