"""One non-streamed model call for a background job, addressed by role (``main`` / ``cheap``)."""

from __future__ import annotations

from typing import Any

from gateway.types import ContextSection, HistoryMessage, LLMRequest, LLMResponse, ResponseFormat, Stability


async def ask(provider: Any, *, source: str, system: str, prompt: str, role: str, max_tokens: int,
              schema: ResponseFormat | None = None) -> LLMResponse:  # fmt: skip
    """``provider.complete`` with one system section and one user message. ``LLMError`` propagates:
    a job that cannot reach its model fails and is retried by the bus, having written nothing.
    ``schema``: the answer as JSON of it where the provider enforces one (``schemas``)."""
    request = LLMRequest(
        system=(ContextSection(source=source, title="", text=system, stability=Stability.STABLE),),
        messages=(HistoryMessage(role="user", content=prompt),),
        role=role,
        stream=False,
        max_tokens=max_tokens,
        response_format=schema,
    )
    response: LLMResponse = await provider.complete(request)
    return response
