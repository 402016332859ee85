"""Anthropic Messages API through ``AsyncAnthropic``: streaming, prompt caching, retries.

The system prompt is sent as two blocks: the stable sections (persona, profile snapshot) with an
ephemeral cache breakpoint, then the volatile ones (date/time, recall). Turn after turn the stable
prefix is served from the prompt cache (tools come before the system prompt in the cached prefix, so
a turn's tool list is sorted and changes only with its tier).

Tools: a ``tool_use`` answer is answered with ``tool_result`` blocks from ``request.run_tool`` and the
model is asked again, streamed or not, for at most ``request.max_tool_rounds`` rounds (``tool_loop``).

Structured output: a request with a ``response_format`` (and no tools of its own) is one call forcing a
tool whose input schema is the format's; the answer's text is that call's input as JSON.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from gateway.config import LLMConfig
from gateway.llm.base import NO_VISION_NOTE, DeltaCallback, sdk_errors
from gateway.llm.tool_loop import Answer, emit, run_tool_loop
from gateway.turn.budget import render_section
from gateway.types import (
    HistoryMessage,
    ImagePart,
    LLMRequest,
    LLMResponse,
    ResponseFormat,
    ToolCall,
    ToolResult,
)
from gateway.util.tls import client_context

log = logging.getLogger("kith.llm.anthropic")


def system_blocks(request: LLMRequest, *, caching: bool) -> list[dict[str, Any]]:
    stable_count = int(request.metadata.get("stable_count", 0))
    stable = "\n\n".join(render_section(s) for s in request.system[:stable_count])
    volatile = "\n\n".join(render_section(s) for s in request.system[stable_count:])
    blocks: list[dict[str, Any]] = []
    if stable:
        block: dict[str, Any] = {"type": "text", "text": stable}
        if caching:
            block["cache_control"] = {"type": "ephemeral"}
        blocks.append(block)
    if volatile:
        blocks.append({"type": "text", "text": volatile})
    return blocks


def image_block(image: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type,
                                        "data": base64.b64encode(image.data).decode("ascii")}}


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return content if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])


def api_messages(history: tuple[HistoryMessage, ...], *, vision: bool = True) -> list[dict[str, Any]]:
    """Alternate roles strictly (the API requires it) and start with a user message. A message with
    images becomes content blocks, images first (as Anthropic recommends), then its text."""
    out: list[dict[str, Any]] = []
    for m in history:
        role = "assistant" if m.role == "assistant" else "user"
        images = m.images if role == "user" else ()
        if not m.content and not images:
            continue
        content: str | list[dict[str, Any]] = m.content
        if images and vision:
            content = [image_block(i) for i in images] + _blocks(m.content)
        elif images:
            content = "\n".join([m.content, *(NO_VISION_NOTE.format(name=i.name or i.mime_type) for i in images)])
        if out and out[-1]["role"] == role:
            prev = out[-1]["content"]
            if isinstance(prev, str) and isinstance(content, str):
                out[-1]["content"] = prev + "\n\n" + content
            else:
                out[-1]["content"] = _blocks(prev) + _blocks(content)
        else:
            out.append({"role": role, "content": content})
    while out and out[0]["role"] != "user":
        out.pop(0)
    return out


def tool_params(request: LLMRequest) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
            for t in request.tools]


def assistant_blocks(content: list[Any]) -> list[dict[str, Any]]:
    """The assistant turn sent back with the tool results, as the API wants it: text and tool_use
    blocks only (empty text blocks are rejected by the API)."""
    out: list[dict[str, Any]] = []
    for b in content:
        kind = getattr(b, "type", "")
        if kind == "text" and b.text:
            out.append({"type": "text", "text": b.text})
        elif kind == "tool_use":
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
    return out


def _answer(message: Any) -> Answer:
    """The loop's view of a Messages API answer: tool calls only when the model stopped for them."""
    text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")
    u = message.usage
    answer = Answer(text=text, model=message.model, stop_reason=message.stop_reason or "",
                    input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                    cache_read_tokens=u.cache_read_input_tokens or 0,
                    cache_write_tokens=u.cache_creation_input_tokens or 0)  # fmt: skip
    if message.stop_reason == "tool_use":
        answer.calls = [ToolCall(id=b.id, name=b.name, input=b.input if isinstance(b.input, dict) else {})
                        for b in message.content if getattr(b, "type", "") == "tool_use"]  # fmt: skip
        answer.reply = {"role": "assistant", "content": assistant_blocks(message.content)}
    return answer


def _tool_results(done: list[tuple[ToolCall, ToolResult]]) -> list[dict[str, Any]]:
    """One user message answering every call of the round."""
    return [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call.id, "content": result.content,
         **({"is_error": True} if result.is_error else {})}
        for call, result in done]}]  # fmt: skip


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, config: LLMConfig) -> None:
        # Imported here, not with this module: the SDK takes ~0.8 s to import, and the message
        # helpers above serve `kith context` and the CLI without a provider (docs/benchmarks.md).
        import anthropic

        assert config.api_key is not None
        self.config = config
        self.client = anthropic.AsyncAnthropic(
            api_key=config.api_key.get_secret_value(),
            base_url=config.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_s,
            http_client=anthropic.DefaultAsyncHttpxClient(verify=client_context()),  # gateway/util/tls.py
        )

    def _model(self, request: LLMRequest) -> str:
        return request.model or self.config.model  # each role has its own provider (LLMConfig.role)

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        """One answer; with tools, the tool loop (``gateway.llm.tool_loop``), which always ends in text."""
        import anthropic  # loaded by __init__ already: a dictionary lookup

        base: dict[str, Any] = {
            "model": self._model(request),
            "max_tokens": request.max_tokens or self.config.max_tokens,
        }
        system = system_blocks(request, caching=self.config.prompt_caching)
        if system:
            base["system"] = system
        caps = self.config.capabilities
        tools = tool_params(request) if request.run_tool is not None and caps.tools else []
        fmt = request.response_format
        if fmt is not None and not tools and caps.tools and caps.structured_output:
            with sdk_errors(anthropic, "anthropic", server="anthropic"):
                return await self._structured(base, request, fmt)

        with sdk_errors(anthropic, "anthropic", server="anthropic"):
            return await run_tool_loop(request, on_delta, body=base,
                                       messages=api_messages(request.messages, vision=caps.vision),
                                       tools=tools, no_tools={"type": "none"}, ask=self._call,
                                       tool_messages=_tool_results, provider=self.name)  # fmt: skip

    async def _structured(self, base: dict[str, Any], request: LLMRequest, fmt: ResponseFormat) -> LLMResponse:
        """The answer as one forced call of a tool whose input schema is the format's: the Messages
        API's way to a JSON answer of a schema. The text is the call's input as JSON; a model that
        answers in text anyway (or is cut off before the call) gives its text, for the tolerant parser."""
        caps = self.config.capabilities
        tool = {"name": fmt.name, "description": fmt.description or f"Give the answer as {fmt.name}.",
                "input_schema": dict(fmt.schema)}  # fmt: skip
        message = await self.client.messages.create(
            **base, messages=api_messages(request.messages, vision=caps.vision), tools=[tool],
            tool_choice={"type": "tool", "name": fmt.name})  # fmt: skip
        answer = _answer(message)
        called = next((b for b in message.content if getattr(b, "type", "") == "tool_use" and b.name == fmt.name),
                      None)  # fmt: skip
        text = json.dumps(called.input, ensure_ascii=False) if called is not None else answer.text
        stop = "end_turn" if message.stop_reason == "tool_use" else (message.stop_reason or "")
        return LLMResponse(text=text, model=answer.model, input_tokens=answer.input_tokens,
                           output_tokens=answer.output_tokens, cache_read_tokens=answer.cache_read_tokens,
                           cache_write_tokens=answer.cache_write_tokens, stop_reason=stop,
                           provider=self.name)  # fmt: skip

    async def _call(self, kwargs: dict[str, Any], on_delta: DeltaCallback | None) -> Answer:
        if on_delta is None:
            return _answer(await self.client.messages.create(**kwargs))
        async with self.client.messages.stream(**kwargs) as stream:
            async for text in stream.text_stream:
                await emit(on_delta, text)
            return _answer(await stream.get_final_message())

    async def close(self) -> None:
        await self.client.close()
