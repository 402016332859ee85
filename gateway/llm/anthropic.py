"""Anthropic Messages API through ``AsyncAnthropic``: streaming, prompt caching, retries.

The system prompt is sent as two blocks: the stable sections (persona, profile snapshot) with an
ephemeral cache breakpoint, then the volatile ones (date/time, recall). Turn after turn the stable
prefix is served from the prompt cache (tools come before the system prompt in the cached prefix, so
a turn's tool list is sorted and changes only with its tier).

Tools: a ``tool_use`` answer is answered with ``tool_result`` blocks from ``request.run_tool`` and the
model is asked again, streamed or not, for at most ``request.max_tool_rounds`` rounds.
"""

from __future__ import annotations

import base64
import inspect
import logging
from collections.abc import Awaitable
from typing import Any

from gateway.config import LLMConfig
from gateway.context import render_section
from gateway.llm.base import NO_VISION_NOTE, DeltaCallback, LLMError
from gateway.types import HistoryMessage, ImagePart, LLMRequest, LLMResponse, ToolCall, ToolResult

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


def _separated(on_delta: DeltaCallback | None, texts: list[str]) -> DeltaCallback | None:
    """Text of a round after a tool round starts a new paragraph, in the stream as in the reply."""
    if on_delta is None or not texts:
        return on_delta
    pending = ["\n\n"]

    def relay(piece: str) -> Awaitable[None] | None:
        if pending and piece:
            piece = pending.pop() + piece
        return on_delta(piece)

    return relay


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
        )

    def _model(self, request: LLMRequest) -> str:
        return request.model or self.config.model  # each role has its own provider (LLMConfig.role)

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        """One answer; with tools, a loop: each ``tool_use`` turn is answered with the tools' results and
        the model asked again, for at most ``request.max_tool_rounds`` rounds. The last allowed call
        forbids further tools (``tool_choice: none``), so the loop always ends in text."""
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
        messages = api_messages(request.messages, vision=caps.vision)
        texts: list[str] = []
        calls: list[ToolCall] = []
        results: list[ToolResult] = []
        usage = {"in": 0, "out": 0, "cache_read": 0, "cache_write": 0}
        stream = on_delta is not None and request.stream
        rounds = 0
        try:
            while True:
                rounds += 1
                kwargs: dict[str, Any] = {**base, "messages": messages}
                last_round = rounds > request.max_tool_rounds
                if tools:
                    kwargs["tools"] = tools
                    if last_round:
                        kwargs["tool_choice"] = {"type": "none"}
                message = await self._call(kwargs, _separated(on_delta, texts) if stream else None)
                u = message.usage
                usage["in"] += u.input_tokens
                usage["out"] += u.output_tokens
                usage["cache_read"] += u.cache_read_input_tokens or 0
                usage["cache_write"] += u.cache_creation_input_tokens or 0
                text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")
                if text:
                    texts.append(text)
                uses = [b for b in message.content if getattr(b, "type", "") == "tool_use"]
                if not tools or not uses or message.stop_reason != "tool_use" or last_round:
                    break
                assert request.run_tool is not None
                messages.append({"role": "assistant", "content": assistant_blocks(message.content)})
                answers: list[dict[str, Any]] = []
                for block in uses:
                    call = ToolCall(id=block.id, name=block.name, input=block.input if isinstance(block.input, dict)
                                    else {})
                    result = await request.run_tool(call)
                    calls.append(call)
                    results.append(result)
                    answers.append({"type": "tool_result", "tool_use_id": block.id, "content": result.content,
                                    **({"is_error": True} if result.is_error else {})})
                messages.append({"role": "user", "content": answers})
        except anthropic.AuthenticationError as exc:
            raise LLMError(f"anthropic rejected the API key: {exc}",
                           user_message="The model rejected kith's API key; the operator must fix it.") from exc
        except anthropic.RateLimitError as exc:
            raise LLMError(f"anthropic rate limit: {exc}", retryable=True,
                           user_message="The model is rate-limited right now. Please try again in a minute.") from exc
        except anthropic.APITimeoutError as exc:
            raise LLMError("anthropic request timed out", retryable=True) from exc
        except anthropic.APIStatusError as exc:
            raise LLMError(f"anthropic error {exc.status_code}: {exc}", retryable=exc.status_code >= 500) from exc
        except anthropic.APIConnectionError as exc:
            raise LLMError(f"cannot reach anthropic: {exc}", retryable=True) from exc
        return LLMResponse(
            text="\n\n".join(texts),
            model=message.model,
            input_tokens=usage["in"],
            output_tokens=usage["out"],
            cache_read_tokens=usage["cache_read"],
            cache_write_tokens=usage["cache_write"],
            stop_reason=message.stop_reason or "",
            provider=self.name,
            tool_calls=tuple(calls),
            tool_results=tuple(results),
            rounds=rounds,
        )

    async def _call(self, kwargs: dict[str, Any], on_delta: DeltaCallback | None) -> Any:
        if on_delta is None:
            return await self.client.messages.create(**kwargs)
        async with self.client.messages.stream(**kwargs) as stream:
            async for text in stream.text_stream:
                result = on_delta(text)
                if inspect.isawaitable(result):
                    await result
            return await stream.get_final_message()

    async def close(self) -> None:
        await self.client.close()
