"""Anthropic Messages API through ``AsyncAnthropic``: streaming, prompt caching, retries.

The system prompt is sent as two blocks: the stable sections (persona, profile snapshot) with an
ephemeral cache breakpoint, then the volatile ones (date/time, recall). Turn after turn the stable
prefix is served from the prompt cache.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import anthropic

from gateway.config import LLMConfig
from gateway.context import render_section
from gateway.llm.base import DeltaCallback, LLMError
from gateway.types import HistoryMessage, LLMRequest, LLMResponse

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


def api_messages(history: tuple[HistoryMessage, ...]) -> list[dict[str, Any]]:
    """Alternate roles strictly (the API requires it) and start with a user message."""
    out: list[dict[str, Any]] = []
    for m in history:
        role = "assistant" if m.role == "assistant" else "user"
        if not m.content:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + m.content
        else:
            out.append({"role": role, "content": m.content})
    while out and out[0]["role"] != "user":
        out.pop(0)
    return out


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, config: LLMConfig) -> None:
        assert config.api_key is not None
        self.config = config
        self.client = anthropic.AsyncAnthropic(
            api_key=config.api_key.get_secret_value(),
            base_url=config.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_s,
        )

    def _model(self, request: LLMRequest) -> str:
        if request.model:
            return request.model
        return self.config.cheap_model if request.role == "cheap" else self.config.model

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        kwargs: dict[str, Any] = {
            "model": self._model(request),
            "max_tokens": request.max_tokens or self.config.max_tokens,
            "messages": api_messages(request.messages),
        }
        system = system_blocks(request, caching=self.config.prompt_caching)
        if system:
            kwargs["system"] = system
        try:
            if on_delta is not None and request.stream:
                async with self.client.messages.stream(**kwargs) as stream:
                    async for text in stream.text_stream:
                        result = on_delta(text)
                        if inspect.isawaitable(result):
                            await result
                    message = await stream.get_final_message()
            else:
                message = await self.client.messages.create(**kwargs)
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
        text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")
        usage = message.usage
        return LLMResponse(
            text=text,
            model=message.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            cache_write_tokens=usage.cache_creation_input_tokens or 0,
            stop_reason=message.stop_reason or "",
            provider=self.name,
        )

    async def close(self) -> None:
        await self.client.close()
