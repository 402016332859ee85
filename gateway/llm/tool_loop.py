"""The tool loop both API providers run: ask the model; while it asks for tools, answer each call with
``request.run_tool``'s result and ask again, for at most ``request.max_tool_rounds`` rounds. The last
allowed call forbids further tools (the provider's ``tool_choice: none``), so the loop always ends in
text. The reply is every round's text, a paragraph apart, in the stream as in the reply.

What differs by API is the provider's: how a call is made and its answer read (``Ask``), and how the
assistant's tool calls and their results are written back into the messages (``Answer.reply``,
``ToolMessages``). Both APIs name the call's fields alike (``messages``, ``tools``, ``tool_choice``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.llm.base import DeltaCallback
from gateway.types import LLMRequest, LLMResponse, ToolCall, ToolResult

Message = dict[str, Any]


@dataclass(slots=True)
class Answer:
    """One model call's answer, as the loop reads it."""

    text: str
    model: str
    stop_reason: str  # in the Anthropic vocabulary the rest of kith logs and tests read
    calls: list[ToolCall] = field(default_factory=list)  # the tools the model asks for; none: it answered
    reply: Message | None = None  # with calls: the assistant message carrying them, sent back before the results
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


# (the call's body, where its text streams or None) -> the answer
Ask = Callable[[Message, DeltaCallback | None], Awaitable[Answer]]
# one round's calls and their results -> the messages that give the model the results
ToolMessages = Callable[[list[tuple[ToolCall, ToolResult]]], list[Message]]


async def run_tool_loop(request: LLMRequest, on_delta: DeltaCallback | None, *, body: Message,
                        messages: list[Message], tools: list[Message], no_tools: object, ask: Ask,
                        tool_messages: ToolMessages, provider: str) -> LLMResponse:  # fmt: skip
    """The model's answer to ``messages`` (extended in place with the tool rounds). Each call sends
    ``body`` with the messages, and ``tools`` when there are any; the last allowed call sets
    ``tool_choice`` to ``no_tools``, the API's "none"."""
    stream = on_delta is not None and request.stream
    texts: list[str] = []
    answers: list[Answer] = []
    ran: list[tuple[ToolCall, ToolResult]] = []
    while True:
        last_round = len(answers) >= request.max_tool_rounds
        kwargs: Message = {**body, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if last_round:
                kwargs["tool_choice"] = no_tools
        answer = await ask(kwargs, paragraphs(on_delta, texts) if stream else None)
        answers.append(answer)
        if answer.text:
            texts.append(answer.text)
        if not tools or not answer.calls or last_round:
            break
        assert request.run_tool is not None and answer.reply is not None
        messages.append(answer.reply)
        done = [(call, await request.run_tool(call)) for call in answer.calls]  # one at a time, in order
        ran += done
        messages.extend(tool_messages(done))
    return LLMResponse(
        text="\n\n".join(texts),
        model=answer.model,
        input_tokens=sum(a.input_tokens for a in answers),
        output_tokens=sum(a.output_tokens for a in answers),
        cache_read_tokens=sum(a.cache_read_tokens for a in answers),
        cache_write_tokens=sum(a.cache_write_tokens for a in answers),
        stop_reason=answer.stop_reason,
        provider=provider,
        tool_calls=tuple(call for call, _ in ran),
        tool_results=tuple(result for _, result in ran),
        rounds=len(answers),
    )


def paragraphs(on_delta: DeltaCallback | None, texts: list[str]) -> DeltaCallback | None:
    """Text of a round after a tool round starts a new paragraph, in the stream as in the reply."""
    if on_delta is None or not texts:
        return on_delta
    pending = ["\n\n"]

    def relay(piece: str) -> Awaitable[None] | None:
        if pending and piece:
            piece = pending.pop() + piece
        return on_delta(piece)

    return relay


async def emit(on_delta: DeltaCallback, piece: str) -> None:
    result = on_delta(piece)
    if inspect.isawaitable(result):
        await result
