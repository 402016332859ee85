"""A local fake of the Anthropic Messages API (``POST /v1/messages``), JSON and SSE streaming.

Driven through the real ``anthropic`` client (``base_url`` pointed here). Responses are scripted
with ``enqueue``; with nothing queued it answers deterministically from the request, so tests can
assert on what the model received (``requests`` keeps every request body).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

API_KEY = "sk-ant-test-key"


@dataclass
class Scripted:
    text: str = ""
    status: int = 200
    error_type: str = "api_error"
    delay_s: float = 0.0


@dataclass
class FakeAnthropic:
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    script: deque[Scripted] = field(default_factory=deque)
    default_delay_s: float = 0.0
    chunk_delay_s: float = 0.0  # pause between streamed pieces, so a UI can be seen streaming
    runner: web.AppRunner | None = None
    port: int = 0

    def enqueue(self, text: str = "", *, status: int = 200, error_type: str = "api_error",
                delay_s: float = 0.0) -> None:
        self.script.append(Scripted(text=text, status=status, error_type=error_type, delay_s=delay_s))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakeAnthropic:
        app = web.Application()
        app.router.add_post("/v1/messages", self.messages)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    # ------------------------------------------------------------------------------ helpers
    def system_text(self, index: int = -1) -> str:
        system = self.requests[index].get("system", [])
        if isinstance(system, str):
            return system
        return "\n".join(block.get("text", "") for block in system)

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
        self.requests.append(body)
        scripted = self.script.popleft() if self.script else Scripted(text=self._default_text(body))
        delay = scripted.delay_s or self.default_delay_s
        if delay:
            await asyncio.sleep(delay)
        if scripted.status != 200:
            return self._error(scripted.status, scripted.error_type)
        text = scripted.text or self._default_text(body)
        prompt_tokens = sum(len(json.dumps(m)) // 4 for m in body["messages"])
        usage = {"input_tokens": prompt_tokens, "output_tokens": len(text) // 4,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        message = {"id": f"msg_fake_{len(self.requests)}", "type": "message", "role": "assistant",
                   "model": body["model"], "stop_reason": "end_turn", "stop_sequence": None, "usage": usage,
                   "content": [{"type": "text", "text": text}]}
        if not body.get("stream"):
            return web.json_response(message)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def event(name: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        await event("message_start", {"type": "message_start", "message": start})
        await event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}})
        pieces = [text[i : i + 8] for i in range(0, len(text), 8)] or [""]
        for piece in pieces:
            if self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s)
            await event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": piece}})
        await event("content_block_stop", {"type": "content_block_stop", "index": 0})
        await event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                      "stop_sequence": None}, "usage": {"output_tokens": usage["output_tokens"]}})
        await event("message_stop", {"type": "message_stop"})
        await resp.write_eof()
        return resp
