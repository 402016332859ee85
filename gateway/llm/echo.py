"""The ``echo`` provider: answers instantly with a digest of what the model would have been sent.

For development and benchmarks: people can see which sections reached the model and their size,
without spending tokens.
"""

from __future__ import annotations

import inspect

from gateway.llm.base import DeltaCallback
from gateway.turn.budget import estimate_tokens
from gateway.types import LLMRequest, LLMResponse


def digest(request: LLMRequest) -> str:
    parts = [f"{s.source}:{estimate_tokens(s.text)}" for s in request.system]
    system_tokens = sum(estimate_tokens(s.text) for s in request.system)
    history_tokens = sum(estimate_tokens(m.content) for m in request.messages)
    last = request.messages[-1].content if request.messages else ""
    images = sum(len(m.images) for m in request.messages)
    return (
        f"echo: {last}\n"
        f"[sections {len(request.system)}: {', '.join(parts)} | system {system_tokens} tok"
        f" | messages {len(request.messages)} ({history_tokens} tok)" + (f" | images {images}" if images else "") + "]"
    )


class EchoProvider:
    name = "echo"

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        text = digest(request)
        if on_delta is not None:
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                result = on_delta(piece)
                if inspect.isawaitable(result):
                    await result
        tokens = sum(estimate_tokens(s.text) for s in request.system) + sum(
            estimate_tokens(m.content) for m in request.messages
        )
        return LLMResponse(text=text, model="echo", input_tokens=tokens, output_tokens=estimate_tokens(text),
                           stop_reason="end_turn", provider=self.name)

    async def close(self) -> None:
        return None
