"""OpenAI-compatible chat completions through the official ``openai`` SDK (``AsyncOpenAI``).

Any server speaking the OpenAI wire format works through ``base_url`` (OpenAI, OpenRouter, Ollama, vLLM,
llama.cpp server, LM Studio), with extra ``headers`` for those that want them. Retries on 408/409/429/5xx
and connection errors are the SDK's (exponential backoff, ``Retry-After`` honoured), ``max_retries`` times.

Tools: streamed tool-call deltas are assembled by their ``index``; each round's calls are answered with
``tool`` messages from ``request.run_tool`` and the model asked again, in the loop the Anthropic provider
runs too (``tool_loop``).

Structured output: a request with a ``response_format`` sends it as ``response_format: json_schema``
(not strict). A server that refuses that form (400, 422 from a FastAPI server validating the body, or
llama-cpp-python's 500 naming ``response_format``) is asked in the next form of ``FORMATS`` from then
on: ``json_object`` with the ``schema`` beside it, which llama-cpp-python's server (``python -m
llama_cpp.server``) turns into a grammar the answer must follow. A server that refuses every form is
asked without one for the provider's lifetime, and the stages parse the text
(``gateway.memory.background.model_output``).
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from gateway.config import LLMConfig
from gateway.llm.base import NO_VISION_NOTE, DeltaCallback, LLMError, sdk_errors
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

log = logging.getLogger("kith.llm.openai")


def data_url(image: ImagePart) -> str:
    return f"data:{image.mime_type};base64,{base64.b64encode(image.data).decode('ascii')}"


def system_text(request: LLMRequest) -> str:
    return "\n\n".join(render_section(s) for s in request.system)


def user_content(m: HistoryMessage, *, vision: bool) -> str | list[dict[str, Any]]:
    if not m.images:
        return m.content
    if not vision:
        notes = [NO_VISION_NOTE.format(name=i.name or i.mime_type) for i in m.images]
        return "\n".join([m.content, *notes]) if m.content else "\n".join(notes)
    parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    parts += [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in m.images]
    return parts


def api_messages(request: LLMRequest, *, vision: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = system_text(request)
    if system:
        out.append({"role": "system", "content": system})
    for m in request.messages:
        if not m.content and not m.images:
            continue
        if m.role == "assistant":
            out.append({"role": "assistant", "content": m.content})
        else:
            out.append({"role": "user", "content": user_content(m, vision=vision)})
    return out


def tool_params(request: LLMRequest) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": dict(t.input_schema)}} for t in request.tools]


def response_format(fmt: ResponseFormat) -> dict[str, Any]:
    """The ``response_format`` body field. Not ``strict``: strict mode wants every property required
    and no free-form maps, and the stages validate what they get anyway."""
    schema: dict[str, Any] = {"name": fmt.name, "schema": dict(fmt.schema), "strict": False}
    if fmt.description:
        schema["description"] = fmt.description
    return {"type": "json_schema", "json_schema": schema}


def json_object_format(fmt: ResponseFormat) -> dict[str, Any]:
    """The older JSON mode with the schema beside it: llama-cpp-python's server (and llama.cpp's own)
    constrain the answer to it by a grammar; a server that ignores ``schema`` still answers JSON."""
    return {"type": "json_object", "schema": dict(fmt.schema)}


# The forms of response_format tried in order; a server refusing one is asked in the next from then on.
FORMATS = (response_format, json_object_format)
FORMAT_NAMES = ("json_schema", "json_object")


def refused(exc: BaseException | None) -> bool:
    """Whether the server refused the request's response_format: 400 or 422 (a FastAPI server validating
    the body); llama-cpp-python's server answers its body validation with 500, naming the field."""
    if isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError)):
        return True
    return isinstance(exc, openai.InternalServerError) and "response_format" in str(exc)


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Round:
    """One model call's answer, from a streamed or a whole response."""

    text: str = ""
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    finish_reason: str = ""
    model: str = ""
    usage: tuple[int, int, int] | None = None  # prompt, completion, cached prompt tokens

    def for_loop(self, model: str) -> Answer:
        """The tool loop's view: ``model`` when the server names none."""
        prompt, completion, cached = self.usage or (0, 0, 0)
        answer = Answer(text=self.text, model=self.model or model, stop_reason=_stop_reason(self.finish_reason),
                        input_tokens=prompt, output_tokens=completion, cache_read_tokens=cached)  # fmt: skip
        if self.calls:
            pending = [self.calls[i] for i in sorted(self.calls)]
            answer.calls = [ToolCall(id=c.id, name=c.name, input=_arguments(c.arguments)) for c in pending]
            answer.reply = {"role": "assistant", "content": self.text or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                for c in pending]}  # fmt: skip
        return answer


def _tool_messages(done: list[tuple[ToolCall, ToolResult]]) -> list[dict[str, Any]]:
    """A ``tool`` message per call, in the calls' order."""
    return [{"role": "tool", "tool_call_id": call.id,
             "content": f"Error: {result.content}" if result.is_error else result.content}
            for call, result in done]  # fmt: skip


class OpenAIProvider:
    name = "openai"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.format_index = 0  # the form of FORMATS this server takes; len(FORMATS): none
        # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
        key = config.api_key.get_secret_value() if config.api_key else "unused"
        self.client = openai.AsyncOpenAI(
            api_key=key,
            base_url=config.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_s,
            default_headers={k: v.get_secret_value() for k, v in config.headers.items()} or None,
            # aiohttp under httpx's interface (the SDK's own option): httpcore's pool re-scanned every
            # connection per request and stalled with 50 concurrent streams (docs/benchmarks.md).
            http_client=openai.DefaultAioHttpClient(timeout=config.timeout_s, verify=client_context()),
        )

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        caps = self.config.capabilities
        base: dict[str, Any] = {"model": request.model or self.config.model,
                                "max_tokens": request.max_tokens or self.config.max_tokens}
        tools = tool_params(request) if request.run_tool is not None and caps.tools and request.tools else []
        structured = (request.response_format is not None and caps.structured_output and not tools
                      and not self.no_structured_output)  # fmt: skip
        used = self.format_index
        if structured:
            assert request.response_format is not None
            base["response_format"] = FORMATS[used](request.response_format)
        try:
            with sdk_errors(openai, "openai", server="the model server", unreachable=(httpx.TransportError,)):
                return await run_tool_loop(request, on_delta, body=base,
                                           messages=api_messages(request, vision=caps.vision),
                                           tools=tools, no_tools="none", ask=self._ask,
                                           tool_messages=_tool_messages, provider=self.name)  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:  # not the OpenAI wire format
            raise LLMError(f"the model server sent an answer kith cannot read: {exc!r}") from exc
        except LLMError as exc:
            if not structured or not refused(exc.__cause__):
                raise
            # A server that does not know this form of response_format (or this schema) says 400 or 422:
            # the next form, and after the last the stages parse text, so the call is made again.
            if self.format_index == used:  # not already moved on by a concurrent call refused the same way
                self.format_index = used + 1
                then = "text" if self.no_structured_output else FORMAT_NAMES[self.format_index]
                log.warning("%s refused a %s answer (%s); asking for %s from now on", self.config.base_url
                            or "the model server", FORMAT_NAMES[used], exc, then)  # fmt: skip
            return await self.complete(request, on_delta)

    @property
    def no_structured_output(self) -> bool:
        """The server refused every form of response_format: answers are asked for as text."""
        return self.format_index >= len(FORMATS)

    async def _ask(self, kwargs: dict[str, Any], on_delta: DeltaCallback | None) -> Answer:
        parsed = await (self._stream(kwargs, on_delta) if on_delta is not None else self._whole(kwargs))
        return parsed.for_loop(kwargs["model"])

    # Requests go through the SDK's client (auth, headers, retries with Retry-After, typed errors), but
    # its typed request transform and response models are skipped: walking them cost more CPU than the
    # rest of a turn (docs/benchmarks.md). The body is the documented wire format, read as plain JSON.
    async def _post(self, body: dict[str, Any], *, stream: bool) -> httpx.Response:
        options: Any = {"headers": {"X-Stainless-Raw-Response": "stream"}} if stream else {}
        return await self.client.post("/chat/completions", cast_to=httpx.Response, body=body, options=options)

    async def _whole(self, kwargs: dict[str, Any]) -> _Round:
        data = (await self._post(kwargs, stream=False)).json()
        out = _Round(model=str(data.get("model") or ""), usage=_usage(data["usage"]) if data.get("usage") else None)
        if data.get("choices"):
            choice = data["choices"][0]
            message = choice.get("message") or {}
            out.text = message.get("content") or ""
            out.finish_reason = choice.get("finish_reason") or ""
            for i, tc in enumerate(message.get("tool_calls") or ()):
                fn = tc.get("function")
                if fn:
                    out.calls[i] = _PendingCall(id=tc.get("id", ""), name=fn.get("name", ""),
                                                arguments=fn.get("arguments") or "")
        return out

    async def _stream(self, kwargs: dict[str, Any], on_delta: DeltaCallback) -> _Round:
        out = _Round()
        pieces: list[str] = []
        response = await self._post({**kwargs, "stream": True, "stream_options": {"include_usage": True}},
                                    stream=True)
        try:
            async for line in response.aiter_lines():
                # Read to the end even after [DONE]: a body left unread closes the connection.
                if not line.startswith("data:") or (data := line[5:].strip()) == "[DONE]":
                    continue
                chunk = json.loads(data)
                if not isinstance(chunk, dict):
                    continue
                if "error" in chunk:  # a server failing mid-stream
                    raise LLMError(f"model server error in stream: {chunk['error']}", retryable=True)
                out.model = chunk.get("model") or out.model
                if chunk.get("usage"):
                    out.usage = _usage(chunk["usage"])
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    content = delta.get("content")
                    if content:
                        pieces.append(content)
                        await emit(on_delta, content)
                    for tc in delta.get("tool_calls") or ():
                        pending = out.calls.setdefault(int(tc.get("index", 0)), _PendingCall())
                        pending.id = tc.get("id") or pending.id
                        fn = tc.get("function") or {}
                        pending.name += fn.get("name") or ""
                        pending.arguments += fn.get("arguments") or ""
                    if choice.get("finish_reason"):
                        out.finish_reason = choice["finish_reason"]
        finally:
            await response.aclose()
        out.text = "".join(pieces)
        return out

    async def transcribe(self, audio: bytes, *, mime_type: str, filename: str) -> str:
        """Speech to text through ``/v1/audio/transcriptions`` (the ``transcription`` role's model)."""
        try:
            result = await self.client.audio.transcriptions.create(
                model=self.config.model, file=(filename or "audio", audio, mime_type))
        except openai.APIStatusError as exc:
            raise LLMError(f"transcription failed ({exc.status_code}): {exc}",
                           retryable=exc.status_code >= 500 or exc.status_code == 429) from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"cannot reach the transcription server: {exc}", retryable=True) from exc
        return (getattr(result, "text", None) or str(result)).strip()

    async def close(self) -> None:
        await self.client.close()


def _usage(raw: dict[str, Any]) -> tuple[int, int, int]:
    details = raw.get("prompt_tokens_details") or {}
    return (int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0),
            int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0)


def _stop_reason(finish_reason: str) -> str:
    """In the Anthropic vocabulary the rest of kith logs and tests read."""
    return {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}.get(finish_reason, finish_reason)
