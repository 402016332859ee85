"""A local fake of an OpenAI-compatible server: ``/v1/chat/completions`` (JSON and SSE), ``/v1/models``,
``/v1/audio/transcriptions`` (multipart), ``/v1/audio/speech`` (JSON in, audio bytes out).

Driven through the real ``openai`` client (``base_url`` = ``fake.base_url``, which ends in ``/v1``).
Answers are scripted with ``enqueue`` (text), ``enqueue_tool_calls`` (an assistant turn calling tools)
and ``enqueue_error`` (429 with ``Retry-After``, 5xx), each for one kind of request (``kind``: a chat
``turn`` by default, or a background stage such as ``memory_writer``; tests/fakes/kinds.py): a request
only takes answers queued for its own kind. With nothing queued for its kind it answers
``fake-openai heard: <last user text>``. ``requests`` keeps every chat request body, ``transcriptions``
every upload. Requests are checked where a client bug would show: every assistant ``tool_calls`` entry
must be answered by a ``tool`` message with its id before the next non-tool message, and a
``tool_choice`` needs ``tools``. Streams are chunked as the real API does: a role chunk, content
deltas, tool-call deltas (id and name first, then the arguments in pieces), a finish chunk, a final
usage chunk with empty ``choices`` when ``stream_options.include_usage`` is set, then ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.kinds import TURN, check_kind, request_kind
from tests.fakes.serve import FakeServer

API_KEY = "sk-openai-test-key"


@dataclass
class Scripted:
    text: str = ""
    status: int = 200
    retry_after: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"id", "name", "arguments"}]
    delay_s: float = 0.0
    finish_reason: str = ""  # "" = "tool_calls" or "stop"; "length" = cut off at the token limit


@dataclass
class FakeOpenAI(FakeServer):
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    transcriptions: list[dict[str, Any]] = field(default_factory=list)  # {"model", "filename", "mime", "data"}
    scripts: dict[str, deque[Scripted]] = field(default_factory=dict)  # kind -> its queued answers
    transcript_text: str = "fake transcript"
    models: list[str] = field(default_factory=lambda: ["fake-gpt", "fake-mini", "whisper-1"])
    api_key: str = API_KEY  # "" accepts any key (a local server without auth)
    name: str = "fake-openai"  # tells two fakes apart in default answers
    in_flight: int = 0  # chat requests being answered now (a slow answer, a stream)
    refuse_response_format: bool = False  # a server that answers 400 to ``response_format`` (older local ones)
    # The response_format types the server takes (None: any); another is answered as llama-cpp-python's
    # server answers ``json_schema`` (it takes text and json_object): its FastAPI body validation error,
    # as a 500 (``response_format_status``; 422 is FastAPI's own default).
    response_format_types: tuple[str, ...] | None = None
    response_format_status: int = 500
    # /v1/audio/speech: every request body, the bytes answered (a test makes real Ogg/Opus for them,
    # tests/channels/oggopus.py) and the status (not 200: the error body OpenAI sends).
    speeches: list[dict[str, Any]] = field(default_factory=list)
    speech_audio: bytes = b""
    speech_status: int = 200

    @property
    def url(self) -> str:
        """What ``base_url`` should be for the openai client."""
        return f"{self.base_url}/v1"

    def script(self, kind: str = TURN) -> deque[Scripted]:
        """The answers queued for ``kind`` (tests/fakes/kinds.py)."""
        return self.scripts.setdefault(check_kind(kind), deque())

    def enqueue(self, text: str, *, delay_s: float = 0.0, kind: str = TURN, finish_reason: str = "") -> None:
        self.script(kind).append(Scripted(text=text, delay_s=delay_s, finish_reason=finish_reason))

    def enqueue_error(self, status: int, *, retry_after: str = "", kind: str = TURN) -> None:
        self.script(kind).append(Scripted(status=status, retry_after=retry_after))

    def enqueue_tool_calls(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> list[str]:
        """Script a chat turn's answer calling tools; returns the call ids."""
        queued = self.script(TURN)
        ids = [f"call_fake_{len(queued)}_{i}" for i in range(len(calls))]
        queued.append(Scripted(text=text, tool_calls=[
            {"id": ids[i], "name": n, "arguments": json.dumps(a)} for i, (n, a) in enumerate(calls)]))
        return ids

    @staticmethod
    def kind_of(body: dict[str, Any]) -> str:
        system = "\n".join(m["content"] if isinstance(m.get("content"), str) else
                           " ".join(p.get("text", "") for p in m.get("content") or [] if isinstance(p, dict))
                           for m in body.get("messages", []) if m.get("role") in ("system", "developer"))
        return request_kind(system)

    def requests_of(self, kind: str) -> list[dict[str, Any]]:
        """Every chat request of one kind, in order."""
        return [r for r in self.requests if self.kind_of(r) == check_kind(kind)]

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/chat/completions", self.chat)
        router.add_get("/v1/models", self.list_models)
        router.add_post("/v1/audio/transcriptions", self.transcribe)
        router.add_post("/v1/audio/speech", self.speak)

    # ---------------------------------------------------------------------------------- helpers
    @staticmethod
    def _error(status: int, message: str, kind: str = "invalid_request_error",
               headers: dict[str, str] | None = None) -> web.Response:
        return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": None}},
                                 status=status, headers=headers)

    def _authorised(self, request: web.Request) -> bool:
        self.headers.append(dict(request.headers))
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return not self.api_key or key == self.api_key

    @staticmethod
    def _check(body: dict[str, Any]) -> str:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not body.get("model"):
            return "'model' and a non-empty 'messages' are required"
        if body.get("tool_choice") is not None and not body.get("tools"):
            return "'tool_choice' is only allowed when 'tools' are specified"
        for t in body.get("tools") or []:
            if t.get("type") != "function" or not t.get("function", {}).get("name"):
                return "tools: each tool needs type 'function' and a function name"
        open_ids: set[str] = set()
        for i, m in enumerate(messages):
            role = m.get("role")
            if role == "tool":
                if m.get("tool_call_id") not in open_ids:
                    return f"messages.[{i}]: a 'tool' message must answer a preceding tool_calls id"
                open_ids.discard(m["tool_call_id"])
                continue
            if open_ids:
                return f"messages.[{i}]: tool_call_ids did not have response messages: {sorted(open_ids)}"
            if role == "assistant":
                open_ids = {c["id"] for c in m.get("tool_calls") or []}
            elif role not in ("system", "user", "developer"):
                return f"messages.[{i}]: unknown role {role!r}"
        if open_ids:
            return f"tool_call_ids did not have response messages: {sorted(open_ids)}"
        return ""

    def _default_text(self, body: dict[str, Any]) -> str:
        last = next((m for m in reversed(body["messages"]) if m.get("role") == "user"), {"content": ""})
        content = last["content"]
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if p.get("type") == "text")
        return f"{self.name} heard: {content}"

    @staticmethod
    def images(body: dict[str, Any]) -> list[str]:
        """The image URLs (data URLs) of a request's messages."""
        return [p["image_url"]["url"] for m in body["messages"] if isinstance(m.get("content"), list)
                for p in m["content"] if p.get("type") == "image_url"]

    # -------------------------------------------------------------------------------- endpoints
    async def list_models(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return self._error(401, "Incorrect API key provided", "invalid_api_key")
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model", "created": 1_700_000_000, "owned_by": "fake"} for m in self.models]})

    async def transcribe(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return self._error(401, "Incorrect API key provided", "invalid_api_key")
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField) or not form.get("model"):
            return self._error(400, "'file' and 'model' are required")
        data = upload.file.read()
        self.transcriptions.append({"model": form["model"], "filename": upload.filename,
                                    "mime": upload.content_type, "data": data})
        return web.json_response({"text": self.transcript_text})

    async def speak(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return self._error(401, "Incorrect API key provided", "invalid_api_key")
        body = await request.json()
        if not isinstance(body, dict) or not body.get("model") or not body.get("input") or not body.get("voice"):
            return self._error(400, "'model', 'input' and 'voice' are required")
        self.speeches.append(body)
        if self.speech_status != 200:
            return self._error(self.speech_status, "the speech model failed", "server_error")
        mime = {"opus": "audio/ogg", "wav": "audio/wav", "flac": "audio/flac", "aac": "audio/aac",
                "pcm": "audio/pcm"}.get(str(body.get("response_format") or "mp3"), "audio/mpeg")
        return web.Response(body=self.speech_audio, content_type=mime)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        try:
            return await self._chat(request)
        finally:
            self.in_flight -= 1

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return self._error(401, "Incorrect API key provided", "invalid_api_key")
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "We could not parse the JSON body of your request.")
        problem = self._check(body)
        if self.refuse_response_format and "response_format" in body:
            problem = "Unrecognized request argument supplied: response_format"
        if problem:
            return self._error(400, problem)
        fmt = body.get("response_format")
        if self.response_format_types is not None and isinstance(fmt, dict) and \
                fmt.get("type") not in self.response_format_types:
            problem = ("1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                       f"'msg': 'Input should be {self.response_format_types}'}}")
            return web.json_response({"error": {"message": problem, "type": "internal_server_error"}}
                                     if self.response_format_status == 500 else {"detail": problem},
                                     status=self.response_format_status)  # fmt: skip
        self.requests.append(body)
        queued = self.script(self.kind_of(body))
        scripted = queued.popleft() if queued else Scripted(text=self._default_text(body))
        if scripted.delay_s:
            await asyncio.sleep(scripted.delay_s)
        if scripted.status != 200:
            headers = {"Retry-After": scripted.retry_after} if scripted.retry_after else None
            kind = "rate_limit_error" if scripted.status == 429 else "server_error"
            return self._error(scripted.status, f"scripted {scripted.status}", kind, headers)
        text = scripted.text
        prompt_tokens = sum(len(json.dumps(m)) // 4 for m in body["messages"])
        completion_tokens = len(text) // 4 + 10 * len(scripted.tool_calls) + 1
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        finish = scripted.finish_reason or ("tool_calls" if scripted.tool_calls else "stop")
        ident, created, model = f"chatcmpl-fake{len(self.requests)}", int(time.time()), body["model"]
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if scripted.tool_calls:
                message["tool_calls"] = [{"id": c["id"], "type": "function",
                                          "function": {"name": c["name"], "arguments": c["arguments"]}}
                                         for c in scripted.tool_calls]
            return web.json_response({"id": ident, "object": "chat.completion", "created": created, "model": model,
                                      "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                   "logprobs": None}], "usage": usage})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
            data = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}
            await resp.write(f"data: {json.dumps(data)}\n\n".encode())

        await chunk({"role": "assistant", "content": ""})
        for i in range(0, len(text), 8):
            await chunk({"content": text[i : i + 8]})
        for index, call in enumerate(scripted.tool_calls):
            await chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                         "function": {"name": call["name"], "arguments": ""}}]})
            raw = call["arguments"]
            for i in range(0, len(raw), 7):
                await chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[i : i + 7]}}]})
        await chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            final = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [], "usage": usage}
            await resp.write(f"data: {json.dumps(final)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
