"""A local Slack speaking the Web API, Socket Mode and the Events API's signing to slack-sdk.

Web API: ``POST /api/<method>`` with a bearer token (or ``token`` in the form), answered as Slack
does: HTTP 200 with ``{"ok": false, "error": ...}`` for a refused token, 429 + ``Retry-After`` when
throttled. Methods: ``auth.test``, ``apps.connections.open`` (app token; answers a ``ws://`` URL of
this server), ``chat.postMessage``, ``chat.update`` and ``chat.delete`` (``messages``, ``timeline``,
``throttle_updates``, ``refuse_updates``), ``chat.postEphemeral``, ``conversations.open``, and the three steps of
``files_upload_v2`` (``files.getUploadURLExternal``, a POST of the bytes, ``files.completeUploadExternal``).
Files the test adds are served at ``/files/<id>`` to the bot token only.

Socket Mode: the socket says ``hello``, then carries envelopes (``push_event``, ``push_command``);
``press`` sends a button's ``block_actions`` (interactive envelope); the client's acks are recorded in
``acks``; ``disconnect()`` asks the client to reconnect; ``drop()`` cuts the connections from Slack's
side, and while ``refuse_sockets`` is set a new one is answered 503 (Slack's socket host is down).
``signed_post`` makes an Events API request as Slack signs it (``v0:<ts>:<body>``).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import aiohttp
from aiohttp import web

from tests.fakes.serve import FakeServer, arrived

BOT_USER = "UKITHBOT"
TEAM = "TKITH"


def sign(secret: str, stamp: str, body: bytes) -> str:
    return "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()


@dataclass
class FakeSlack(FakeServer):
    bot_token: str
    app_token: str
    revoked: bool = False
    throttle_next: int = 0
    posted: list[dict[str, Any]] = field(default_factory=list)  # chat.postMessage arguments
    throttle_updates: int = 0  # the next chat.update calls answer 429 with Retry-After: 1
    refuse_updates: int = 0  # the next chat.update calls answer ok: false, cant_update_message
    ephemeral: list[dict[str, Any]] = field(default_factory=list)  # chat.postEphemeral arguments
    messages: dict[str, str] = field(default_factory=dict)  # ts -> text, as posted and updated
    timeline: list[dict[str, Any]] = field(default_factory=list)  # every post, update, delete (and 429) with its time
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)  # file id -> {"name", "data", "channel"}
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    downloads: list[str] = field(default_factory=list)
    acks: list[str] = field(default_factory=list)
    connections: int = 0
    refuse_sockets: bool = False  # the socket URL answers 503 (apps.connections.open still answers)
    calls: list[str] = field(default_factory=list)
    _sockets: list[web.WebSocketResponse] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def api_base(self) -> str:
        return self.base_url + "/api/"

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/api/{method}", self._api)
        router.add_get("/socket", self._socket)
        router.add_post("/upload/{file_id}", self._upload)
        router.add_get("/files/{file_id}", self._download)

    async def close(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        await super().close()

    # ----------------------------------------------------------------------------- test helpers
    def add_file(self, data: bytes, *, name: str, mimetype: str) -> dict[str, Any]:
        """A file as Slack describes it inside a message event."""
        file_id = f"F{next(self._ids):06d}"
        self.files[file_id] = (data, mimetype)
        return {"id": file_id, "name": name, "mimetype": mimetype, "size": len(data),
                "url_private_download": f"{self.base_url}/files/{file_id}"}

    def message(self, *, user: str, channel: str, text: str, channel_type: str = "im", **extra: Any) -> dict[str, Any]:
        """An ``event_callback`` payload carrying a message event."""
        ts = f"{int(time.time())}.{next(self._ids):06d}"
        event = {"type": "message", "user": user, "channel": channel, "text": text, "ts": ts,
                 "channel_type": channel_type, "team": TEAM, **extra}
        return {"token": "legacy", "team_id": TEAM, "type": "event_callback", "event_id": f"Ev{next(self._ids)}",
                "event_time": int(time.time()), "event": event}

    async def push_event(self, payload: dict[str, Any]) -> str:
        return await self._push("events_api", payload)

    async def push_command(self, *, user: str, text: str, command: str = "/kith", channel: str = "C1") -> str:
        return await self._push("slash_commands", {"command": command, "text": text, "user_id": user,
                                                   "user_name": user.lower(), "channel_id": channel,
                                                   "trigger_id": f"trig{next(self._ids)}", "team_id": TEAM})

    async def press(self, *, user: str, posted: dict[str, Any], action_id: str) -> str:
        """``user`` presses the button ``action_id`` of the message ``posted`` (a chat.postMessage call):
        the ``block_actions`` envelope Slack sends over Socket Mode."""
        channel = str(posted["channel"])
        container = {"type": "message", "message_ts": posted["ts"], "channel_id": channel, "is_ephemeral": False}
        if posted.get("thread_ts"):
            container["thread_ts"] = posted["thread_ts"]
        return await self._push("interactive", {
            "type": "block_actions", "user": {"id": user, "username": user.lower(), "name": user.lower(),
                                              "team_id": TEAM},
            "api_app_id": "AKITH", "token": "legacy", "container": container, "trigger_id": f"trig{next(self._ids)}",
            "team": {"id": TEAM, "domain": "kith-test"}, "channel": {"id": channel, "name": "directmessage"},
            "message": {"type": "message", "ts": posted["ts"], "text": posted.get("text"),
                        "blocks": posted.get("blocks") or []},
            "actions": [{"type": "button", "action_id": action_id, "block_id": "kith_confirm", "value": "press",
                         "action_ts": f"{time.time():.6f}"}]})

    async def _push(self, kind: str, payload: dict[str, Any]) -> str:
        envelope = f"env-{next(self._ids)}"
        await arrived(self._sockets, 1, "Socket Mode connections")
        await self._sockets[-1].send_str(json.dumps({"envelope_id": envelope, "type": kind, "payload": payload,
                                                     "accepts_response_payload": False, "retry_attempt": 0}))
        return envelope

    async def disconnect(self) -> None:
        await self._sockets[-1].send_str(json.dumps({"type": "disconnect", "reason": "refresh_requested"}))

    async def drop(self) -> None:
        """Every Socket Mode connection is closed from Slack's side, without a ``disconnect`` first."""
        for ws in list(self._sockets):
            await ws.close()

    async def signed_post(self, http: aiohttp.ClientSession, url: str, body: bytes, *, secret: str,
                          content_type: str = "application/json", stamp: str | None = None,
                          signature: str | None = None) -> aiohttp.ClientResponse:  # fmt: skip
        stamp = stamp if stamp is not None else str(int(time.time()))
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": stamp,
                   "X-Slack-Signature": signature if signature is not None else sign(secret, stamp, body)}
        async with http.post(url, data=body, headers=headers) as resp:
            await resp.read()
            return resp

    def command_form(self, *, user: str, text: str, command: str = "/kith") -> bytes:
        return urlencode({"command": command, "text": text, "user_id": user, "user_name": user.lower(),
                          "channel_id": "C1", "trigger_id": f"trig{next(self._ids)}"}).encode()

    async def wait_posted(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return await arrived(self.posted, count, "chat.postMessage calls", timeout)

    # ---------------------------------------------------------------------------------- protocol
    async def _args(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        if request.content_type == "application/json" and raw:
            data = json.loads(raw)
            return data if isinstance(data, dict) else {}
        return dict(parse_qsl(raw.decode(), keep_blank_values=True)) if raw else dict(request.query)

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        self.calls.append(method)
        args = await self._args(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ") or str(args.get("token", ""))
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if self.revoked or token != wanted:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        if method == "chat.postMessage" and self.throttle_next > 0:
            self.throttle_next -= 1
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "0"})
        if method == "chat.update" and self.throttle_updates > 0:
            self.throttle_updates -= 1
            self.timeline.append({"at": time.monotonic(), "method": "429 chat.update", "ts": args.get("ts")})
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "1"})
        if method == "chat.update" and self.refuse_updates > 0:
            self.refuse_updates -= 1
            self.timeline.append({"at": time.monotonic(), "method": "refused chat.update", "ts": args.get("ts")})
            return web.json_response({"ok": False, "error": "cant_update_message"})
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        return web.json_response({"ok": True, **handler(args)})

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": "https://kith-test.slack.com/", "team": "kith-test", "user": "kith", "team_id": TEAM,
                "user_id": BOT_USER, "bot_id": "BKITH"}

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.base_url.replace("http://", "ws://") + "/socket"}

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = f"{int(time.time())}.{next(self._ids):06d}"
        self.posted.append({**args, "ts": ts})
        self.messages[ts] = str(args.get("text", ""))
        self.timeline.append({"at": time.monotonic(), "method": "chat.postMessage", "ts": ts, "text": args.get("text")})
        return {"channel": args.get("channel"), "ts": ts, "message": {"text": args.get("text"), "ts": ts}}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = str(args.get("ts", ""))
        if ts not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        self.messages[ts] = str(args.get("text", ""))
        self.timeline.append({"at": time.monotonic(), "method": "chat.update", "ts": ts, "text": args.get("text"),
                              "blocks": args.get("blocks")})
        return {"channel": args.get("channel"), "ts": ts, "text": args.get("text")}

    def _m_chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = str(args.get("ts", ""))
        if self.messages.pop(ts, None) is None:
            return {"ok": False, "error": "message_not_found"}
        self.timeline.append({"at": time.monotonic(), "method": "chat.delete", "ts": ts})
        return {"channel": args.get("channel"), "ts": ts}

    def shown(self) -> list[str]:
        """The bot's messages as they read now, oldest first."""
        return [text for _, text in sorted(self.messages.items())]

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        self.ephemeral.append(args)
        return {"message_ts": f"{int(time.time())}.{next(self._ids):06d}"}

    def _m_conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"channel": {"id": "D" + str(args.get("users", "")).split(",")[0]}}

    def _m_files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F{next(self._ids):06d}"
        self.uploads[file_id] = {"name": args.get("filename"), "length": int(args.get("length", 0))}
        return {"upload_url": f"{self.base_url}/upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        items = args.get("files")
        items = json.loads(items) if isinstance(items, str) else items
        for item in items:
            self.uploads[item["id"]]["channel"] = args.get("channel_id")
        return {"files": [{"id": item["id"], "title": item.get("title")} for item in items]}

    async def _upload(self, request: web.Request) -> web.Response:
        item = self.uploads.get(request.match_info["file_id"])
        if item is None:
            return web.Response(status=404)
        item["data"] = await request.read()
        return web.Response(text="OK - " + str(len(item["data"])))

    async def _download(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            return web.Response(status=302, headers={"Location": "https://kith-test.slack.com/?redir=login"})
        item = self.files.get(request.match_info["file_id"])
        if item is None:
            return web.Response(status=404)
        self.downloads.append(request.match_info["file_id"])
        return web.Response(body=item[0], content_type=item[1])

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        if self.refuse_sockets:
            return web.Response(status=503)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections += 1
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1,
                                      "debug_info": {"host": "fake", "approximate_connection_time": 18060},
                                      "connection_info": {"app_id": "AKITH"}}))
        try:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    if isinstance(data, dict) and "envelope_id" in data:
                        self.acks.append(str(data["envelope_id"]))
        finally:
            self._sockets.remove(ws)
        return ws
