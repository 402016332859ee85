"""A local fake of the Anthropic Messages API (``POST /v1/messages``), JSON and SSE streaming.

Driven through the real ``anthropic`` client (``base_url`` pointed here). Responses are scripted
with ``enqueue`` (text) and ``enqueue_tool_use`` (a ``tool_use`` turn, optionally after some text), each
for one kind of request (``kind``: a chat ``turn`` by default, or a background stage such as
``memory_writer``; tests/fakes/kinds.py): a request only ever takes an answer queued for its own kind.
With nothing queued for its kind it answers deterministically from the request, so tests can assert on
what the model received (``requests`` keeps every request body). Requests are checked the way the real API checks
them where a client bug would show: ``tool_use`` blocks need ``tools``, and every ``tool_use`` must be
answered by a ``tool_result`` with its id at the start of the next user message. A request forcing a
tool (``tool_choice: {"type": "tool"}``, structured output) gets a scripted JSON object as that tool's
input.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.kinds import TURN, check_kind, request_kind
from tests.fakes.serve import serve

API_KEY = "sk-ant-test-key"


@dataclass
class Scripted:
    text: str = ""
    status: int = 200
    error_type: str = "api_error"
    delay_s: float = 0.0
    tool_uses: list[dict[str, Any]] = field(default_factory=list)  # [{"id", "name", "input"}]


@dataclass
class FakeAnthropic:
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    scripts: dict[str, deque[Scripted]] = field(default_factory=dict)  # kind -> its queued answers
    default_delay_s: float = 0.0
    chunk_delay_s: float = 0.0  # pause between streamed pieces, so a UI can be seen streaming
    runner: web.AppRunner | None = None
    port: int = 0
    # Answer by content instead of by order (background jobs call the model at unpredictable times):
    # the first responder returning an answer (text, or a ``Scripted`` that may call tools) answers the
    # request; None lets the script/default answer.
    responders: list[Callable[[dict[str, Any]], str | Scripted | None]] = field(default_factory=list)

    def script(self, kind: str = TURN) -> deque[Scripted]:
        """The answers queued for ``kind`` (tests/fakes/kinds.py)."""
        return self.scripts.setdefault(check_kind(kind), deque())

    def enqueue(self, text: str = "", *, status: int = 200, error_type: str = "api_error",
                delay_s: float = 0.0, kind: str = TURN) -> None:
        self.script(kind).append(Scripted(text=text, status=status, error_type=error_type, delay_s=delay_s))

    def enqueue_tool_use(self, name: str, input: dict[str, Any] | None = None, *, text: str = "",
                         tool_id: str = "", more: tuple[tuple[str, dict[str, Any]], ...] = ()) -> list[str]:
        """Script a chat turn's answer that calls ``name`` with ``input`` (after ``text``, if any), and
        optionally more tools in the same turn. Returns the tool_use ids."""
        calls = [(name, input or {}), *more]
        queued = self.script(TURN)
        uses = [{"id": (tool_id if i == 0 and tool_id else f"toolu_fake_{len(queued)}_{i}"), "name": n,
                 "input": args} for i, (n, args) in enumerate(calls)]
        queued.append(Scripted(text=text, tool_uses=uses))
        return [u["id"] for u in uses]

    def kind_of(self, body: dict[str, Any]) -> str:
        return request_kind(self.system_of(body))

    def requests_of(self, kind: str) -> list[dict[str, Any]]:
        """Every request of one kind, in order."""
        return [r for r in self.requests if self.kind_of(r) == check_kind(kind)]

    def tool_results(self, index: int = -1) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of request ``index``'s last user message."""
        last = self.requests[index]["messages"][-1]
        content = last["content"] if isinstance(last["content"], list) else []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]

    def tool_names(self, index: int = -1) -> list[str]:
        return [t["name"] for t in self.requests[index].get("tools", [])]

    def offered_tools(self, index: int = -1) -> set[str]:
        """The tools request ``index`` offers: its own, and the deferred ones ``more_tools`` names
        (gateway/tools.py: their schemas load on demand)."""
        tools = self.requests[index].get("tools", [])
        more = next((t["description"] for t in tools if t["name"] == "more_tools"), "")
        deferred = {line[2:].split(":", 1)[0] for line in more.splitlines() if line.startswith("- ")}
        return {t["name"] for t in tools if t["name"] != "more_tools"} | deferred

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakeAnthropic:
        app = web.Application()
        app.router.add_post("/v1/messages", self.messages)
        self.runner, self.port = await serve(app)
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    # ------------------------------------------------------------------------------ helpers
    def system_text(self, index: int = -1) -> str:
        return self.system_of(self.requests[index])

    @staticmethod
    def system_of(body: dict[str, Any]) -> str:
        system = body.get("system", [])
        if isinstance(system, str):
            return system
        return "\n".join(block.get("text", "") for block in system)

    def turn_requests(self) -> list[dict[str, Any]]:
        """Requests made for conversation turns (their prompt carries kith's system block), not by
        background jobs (memory writer, compaction...), which call the model at moments a test does
        not control."""
        return [r for r in self.requests if "--- System ---\nCurrent date and time" in self.system_of(r)]

    def last_turn(self) -> dict[str, Any]:
        return self.turn_requests()[-1]

    @staticmethod
    def _default_text(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"] if body.get("messages") else ""
        if isinstance(last, list):
            last = " ".join(part.get("text", "") for part in last if isinstance(part, dict))
        return f"fake-claude heard: {last}"

    @staticmethod
    def _error(status: int, error_type: str) -> web.Response:
        return web.json_response(
            {"type": "error", "error": {"type": error_type, "message": f"scripted {status}"}}, status=status
        )

    @staticmethod
    def _check_tools(body: dict[str, Any]) -> str:
        """The real API's checks on tool blocks (the messages a client builds across tool rounds)."""
        messages = body["messages"]
        tools = body.get("tools") or []
        for t in tools:
            if not isinstance(t, dict) or not t.get("name") or not isinstance(t.get("input_schema"), dict):
                return "tools: each tool needs a name and an input_schema object"
        choice = body.get("tool_choice")
        if choice is not None and (not tools or choice.get("type") not in ("auto", "any", "tool", "none")):
            return "tool_choice: requires tools and a known type"
        for i, m in enumerate(messages):
            content = m.get("content")
            if not isinstance(content, list):
                continue
            uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            if uses and m.get("role") != "assistant":
                return f"messages.{i}: tool_use blocks may only appear in assistant messages"
            if uses and not tools:
                return "Requests which include `tool_use` or `tool_result` blocks must define tools."
            if not uses:
                continue
            nxt = messages[i + 1]["content"] if i + 1 < len(messages) else None
            results = [b for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"] \
                if isinstance(nxt, list) else []
            if messages[i + 1:i + 2] and messages[i + 1].get("role") != "user":
                return f"messages.{i + 1}: a tool_use must be followed by a user message"
            if {r.get("tool_use_id") for r in results} != {u.get("id") for u in uses} or (
                    isinstance(nxt, list) and nxt[: len(results)] != results):
                return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                        "after")
        return ""

    # ----------------------------------------------------------------------------- endpoint
    async def messages(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("x-api-key") or request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.headers.append(dict(request.headers))
        if key != API_KEY:
            return self._error(401, "authentication_error")
        if "anthropic-version" not in request.headers:
            return self._error(400, "invalid_request_error")
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "invalid_request_error")
        for required in ("model", "max_tokens", "messages"):
            if required not in body:
                return self._error(400, "invalid_request_error")
        problem = self._check_tools(body)
        if problem:
            return web.json_response(
                {"type": "error", "error": {"type": "invalid_request_error", "message": problem}}, status=400)
        self.requests.append(body)
        answer = next((t for t in (r(body) for r in self.responders) if t is not None), None)
        if answer is not None:
            scripted = answer if isinstance(answer, Scripted) else Scripted(text=answer)
        else:
            queued = self.script(self.kind_of(body))
            scripted = queued.popleft() if queued else Scripted(text=self._default_text(body))
        forced = body.get("tool_choice") or {}
        if forced.get("type") == "tool" and not scripted.tool_uses and scripted.status == 200:
            # A forced tool (structured output): a model must call it, so a scripted JSON object is
            # its input; anything else stays text, as a model that cannot comply would answer.
            try:
                given = json.loads(scripted.text)
            except ValueError:
                given = None
            if isinstance(given, dict):
                scripted = Scripted(delay_s=scripted.delay_s, tool_uses=[
                    {"id": f"toolu_fake_{len(self.requests)}", "name": forced["name"], "input": given}])
        delay = scripted.delay_s or self.default_delay_s
        if delay:
            await asyncio.sleep(delay)
        if scripted.status != 200:
            return self._error(scripted.status, scripted.error_type)
        text = scripted.text if scripted.tool_uses else (scripted.text or self._default_text(body))
        prompt_tokens = sum(len(json.dumps(m)) // 4 for m in body["messages"])
        usage = {"input_tokens": prompt_tokens, "output_tokens": len(text) // 4 + 10 * len(scripted.tool_uses),
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", **use} for use in scripted.tool_uses]
        stop_reason = "tool_use" if scripted.tool_uses else "end_turn"
        message = {"id": f"msg_fake_{len(self.requests)}", "type": "message", "role": "assistant",
                   "model": body["model"], "stop_reason": stop_reason, "stop_sequence": None, "usage": usage,
                   "content": content}
        if not body.get("stream"):
            return web.json_response(message)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def event(name: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        await event("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(content):
            if block["type"] == "text":
                await event("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": {"type": "text", "text": ""}})
                pieces = [text[i : i + 8] for i in range(0, len(text), 8)] or [""]
                for piece in pieces:
                    if self.chunk_delay_s:
                        await asyncio.sleep(self.chunk_delay_s)
                    await event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                        "delta": {"type": "text_delta", "text": piece}})
            else:
                # As the API streams it: an empty input object, then the JSON in partial pieces.
                await event("content_block_start", {"type": "content_block_start", "index": index,
                                                    "content_block": {**block, "input": {}}})
                raw = json.dumps(block["input"])
                for i in range(0, len(raw), 7):
                    await event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                        "delta": {"type": "input_json_delta",
                                                                  "partial_json": raw[i : i + 7]}})
            await event("content_block_stop", {"type": "content_block_stop", "index": index})
        await event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason,
                                      "stop_sequence": None}, "usage": {"output_tokens": usage["output_tokens"]}})
        await event("message_stop", {"type": "message_stop"})
        await resp.write_eof()
        return resp
