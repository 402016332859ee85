"""The provider contract and the errors a model call can end in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Protocol, runtime_checkable

from gateway.types import LLMRequest, LLMResponse

DeltaCallback = Callable[[str], Awaitable[None] | None]


class LLMError(Exception):
    """A model call failed after retries; ``user_message`` is safe to show in the chat."""

    def __init__(self, message: str, *, user_message: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.user_message = user_message or "The model is unavailable right now. Please try again shortly."
        self.retryable = retryable


@contextmanager
def sdk_errors(sdk: ModuleType, name: str, *, server: str,
               unreachable: tuple[type[BaseException], ...] = ()) -> Iterator[None]:  # fmt: skip
    """An API SDK's errors (``anthropic`` and ``openai`` name them alike) as ``LLMError``, retryable
    where trying later may help. ``server``: what is unreachable on a connection error, which
    ``unreachable`` (a transport's own errors) also are."""
    try:
        yield
    except sdk.AuthenticationError as exc:
        raise LLMError(f"{name} rejected the API key: {exc}",
                       user_message="The model rejected kith's API key; the operator must fix it.") from exc
    except sdk.RateLimitError as exc:
        raise LLMError(f"{name} rate limit: {exc}", retryable=True,
                       user_message="The model is rate-limited right now. Please try again in a minute.") from exc
    except sdk.APITimeoutError as exc:
        raise LLMError(f"{name} request timed out", retryable=True) from exc
    except sdk.APIStatusError as exc:
        raise LLMError(f"{name} error {exc.status_code}: {exc}", retryable=exc.status_code >= 500) from exc
    except (sdk.APIConnectionError, *unreachable) as exc:
        raise LLMError(f"cannot reach {server}: {exc}", retryable=True) from exc


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
