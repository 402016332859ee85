"""The provider contract and the errors a model call can end in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from gateway.types import LLMRequest, LLMResponse

DeltaCallback = Callable[[str], Awaitable[None] | None]


class LLMError(Exception):
    """A model call failed after retries; ``user_message`` is safe to show in the chat."""

    def __init__(self, message: str, *, user_message: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.user_message = user_message or "The model is unavailable right now. Please try again shortly."
        self.retryable = retryable


class Provider(Protocol):
    name: str

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse: ...

    async def close(self) -> None: ...


@runtime_checkable
class Transcriber(Protocol):
    """A provider that can turn speech into text (the ``transcription`` role)."""

    async def transcribe(self, audio: bytes, *, mime_type: str, filename: str) -> str: ...


NO_VISION_NOTE = "[image {name}: not shown, this model cannot see images]"

NO_MODEL_HELP = (
    "No language model is configured, so I can't answer yet. To use Claude, set the environment "
    "variable ANTHROPIC_API_KEY (or `llm.api_key: ${ANTHROPIC_API_KEY}` in config.yaml) and restart "
    "kith. For a dry run without a model, set `llm.provider: echo`."
)
