"""Optional offline model through llama-cpp-python (extra ``kith[local]``, not installed by default).

Runs the GGUF file named by ``llm.local_model_path`` on the CPU in a worker thread, so the event loop
never blocks on generation.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.config import LLMConfig
from gateway.context import render_section
from gateway.llm.base import DeltaCallback, LLMError
from gateway.types import LLMRequest, LLMResponse


class LocalProvider:
    name = "local"

    def __init__(self, config: LLMConfig) -> None:
        try:
            from llama_cpp import Llama  # type: ignore[import-not-found]
        except ImportError as exc:
            raise LLMError("llama-cpp-python is not installed (pip install 'kith[local]')") from exc
        if not config.local_model_path:
            raise LLMError("llm.local_model_path must name a GGUF file for provider 'local'")
        self.config = config
        self.model: Any = Llama(model_path=config.local_model_path, n_ctx=4096, verbose=False)

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        system = "\n\n".join(render_section(s) for s in request.system)
        messages = [{"role": "system", "content": system}] + [
            {"role": m.role, "content": m.content} for m in request.messages
        ]

        def run() -> Any:
            return self.model.create_chat_completion(messages=messages, max_tokens=request.max_tokens)

        out = await asyncio.to_thread(run)
        text = out["choices"][0]["message"]["content"] or ""
        if on_delta is not None:
            result = on_delta(text)
            if asyncio.iscoroutine(result):
                await result
        usage = out.get("usage", {})
        return LLMResponse(text=text, model="local", input_tokens=usage.get("prompt_tokens", 0),
                           output_tokens=usage.get("completion_tokens", 0), provider=self.name)

    async def close(self) -> None:
        return None
