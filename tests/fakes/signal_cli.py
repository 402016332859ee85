"""A local ``signal-cli`` daemon speaking its HTTP interface: JSON-RPC 2.0 at ``POST /api/v1/rpc``,
Server-Sent Events at ``GET /api/v1/events`` (``event:receive`` + ``data:{"envelope": ...}``, and
keep-alive comments), ``GET /api/v1/check``.

Methods: ``send`` (recipient or groupId, message, quoteTimestamp/quoteAuthor, data-URI attachments),
``getAttachment`` (base64 of a file the test added). Errors have JSON-RPC's shape. ``drop()`` ends
the event stream, as a restarting daemon does.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.serve import FakeServer, arrived

BOT_NUMBER = "+4915100000001"


@dataclass
class FakeSignalCli(FakeServer):
    account: str = BOT_NUMBER
    sent: list[dict[str, Any]] = field(default_factory=list)  # send params
    files: dict[str, bytes] = field(default_factory=dict)
    fetched: list[dict[str, Any]] = field(default_factory=list)
    streams: int = 0
    _queues: list[asyncio.Queue[str | None]] = field(default_factory=list)
    _clock: itertools.count[int] = field(default_factory=lambda: itertools.count(int(time.time() * 1000)))

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/api/v1/rpc", self._rpc)
        router.add_get("/api/v1/events", self._events)
        router.add_get("/api/v1/check", self._check)

    async def close(self) -> None:
        self.drop()
        await super().close()

    # ----------------------------------------------------------------------------- test helpers
    def add_file(self, data: bytes, *, filename: str, content_type: str) -> dict[str, Any]:
        file_id = f"att{next(self._clock)}.bin"
        self.files[file_id] = data
        return {"contentType": content_type, "filename": filename, "id": file_id, "size": len(data)}

    async def say(self, text: str, *, uuid: str, number: str = "", name: str = "", group: str = "",
                  **data: Any) -> int:  # fmt: skip
        """A message from ``uuid`` (in ``group`` when given); its timestamp."""
        ts = next(self._clock)
        message: dict[str, Any] = {"timestamp": ts, "message": text, "expiresInSeconds": 0, "viewOnce": False, **data}
        if group:
            message["groupInfo"] = {"groupId": group, "groupName": "team", "revision": 1, "type": "DELIVER"}
        await self.push({"source": number or uuid, "sourceNumber": number or None, "sourceUuid": uuid,
                         "sourceName": name, "sourceDevice": 1, "timestamp": ts, "serverReceivedTimestamp": ts,
                         "dataMessage": message})  # fmt: skip
        return ts

    async def push(self, envelope: dict[str, Any]) -> None:
        await arrived(self._queues, 1, "event streams")
        frame = f"event:receive\ndata:{json.dumps({'envelope': envelope, 'account': self.account})}\n\n"
        for queue in self._queues:
            await queue.put(frame)

    async def keepalive(self) -> None:
        for queue in self._queues:
            await queue.put(":\n\n")

    def drop(self) -> None:
        for queue in self._queues:
            queue.put_nowait(None)

    async def wait_sent(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return await arrived(self.sent, count, "messages sent", timeout)

    # ---------------------------------------------------------------------------------- protocol
    async def _check(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._queues.append(queue)
        self.streams += 1
        try:
            while (frame := await queue.get()) is not None:
                await resp.write(frame.encode())
        finally:
            self._queues.remove(queue)
        return resp

    async def _rpc(self, request: web.Request) -> web.Response:
        body = await request.json()
        rid, method, params = body.get("id"), body.get("method"), body.get("params") or {}
        if body.get("jsonrpc") != "2.0":
            return _error(rid, -32600, "Invalid request")
        if params.get("account", self.account) != self.account:
            return _error(rid, -32602, "Specified account does not exist")
        if method == "send":
            if not params.get("recipient") and not params.get("groupId"):
                return _error(rid, -32602, "No recipients given")
            for uri in params.get("attachments") or ():
                head, _, payload = uri.partition(",")
                params.setdefault("decoded", []).append((head, base64.b64decode(payload)))
            self.sent.append(params)
            ts = next(self._clock)
            return web.json_response({"jsonrpc": "2.0", "id": rid, "result": {"timestamp": ts, "results": [
                {"recipientAddress": {"number": r}, "type": "SUCCESS"} for r in params.get("recipient") or ()]}})
        if method == "getAttachment":
            data = self.files.get(str(params.get("id")))
            if data is None or not (params.get("recipient") or params.get("groupId")):
                return _error(rid, -1, "Attachment not found")
            self.fetched.append(params)
            return web.json_response({"jsonrpc": "2.0", "id": rid, "result": {"data": base64.b64encode(data).decode()}})
        return _error(rid, -32601, "Method not implemented")


def _error(rid: Any, code: int, message: str) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})
