"""A local Discord: REST (``/api/v10``) plus the gateway websocket, enough for discord.py 2.x.

Gateway: HELLO -> (IDENTIFY -> READY + GUILD_CREATE | RESUME -> replay + RESUMED), heartbeats ACKed,
MESSAGE_CREATE dispatched with sequence numbers. REST: ``users/@me``, ``gateway``, typing, create
message (429 with ``retry_after`` on demand). Every JSON answer carries ``Content-Type:
application/json`` exactly: discord.py compares the header verbatim and treats anything else as text.

CDN: ``attachment()`` stores a file and returns the attachment object a MESSAGE_CREATE carries, with
a signed ``url`` (``?ex=&is=&hm=`` as Discord signs them) served by ``GET /attachments/<channel>/<id>/<name>``;
an unsigned or unknown URL answers 404 like the real CDN.

Streaming: ``PATCH``/``DELETE`` of a message the bot created; ``timeline`` records every create, edit
and delete (and each 429, ``throttle_edits`` of them for the next edits) with its arrival time, and
``channel_messages`` what each message shows now.

Buttons: a created message keeps its ``components`` (``CreatedMessage.buttons()``); ``press()``
dispatches the INTERACTION_CREATE of a button press, and its callback (``POST /interactions/<id>/<token>
/callback``, answered once) is recorded in ``interaction_responses``.

Switches: ``drop()`` closes every gateway connection, ``silent`` stops heartbeat ACKs and events on
open connections (a zombie connection), ``reject_token`` closes new sessions with 4004 and 401s REST.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.serve import FakeServer, arrived

BOT_ID = 880000000000000001
BOT_NAME = "kith"
GUILD_ID = 880000000000000100
TEXT_CHANNEL_ID = 880000000000000200
THREAD_ID = 880000000000000300
_snowflakes = itertools.count(990000000000000000)


def snowflake() -> str:
    return str(next(_snowflakes))


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json", **(headers or {})}
    )


def user_payload(user_id: int | str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"id": str(user_id), "username": name, "discriminator": "0", "global_name": name, "avatar": None,
            "bot": bot}


@dataclass
class CreatedMessage:
    channel_id: int
    content: str
    reference: str | None
    components: list[dict[str, Any]] | None = None
    message_id: str = ""

    def buttons(self) -> dict[str, str]:
        """label -> custom_id of the message's buttons."""
        return {c["label"]: c["custom_id"] for row in self.components or [] for c in row.get("components", [])
                if c.get("type") == 2}


@dataclass
class Event:
    at: float  # time.monotonic() when the request arrived
    method: str  # create, edit, delete, or "429 edit"
    channel_id: int
    message_id: str
    content: str


@dataclass
class CdnFile:
    data: bytes
    content_type: str
    chunked: bool = False  # served without Content-Length


@dataclass
class FakeDiscord(FakeServer):
    token: str
    heartbeat_interval_ms: int = 500
    silent: bool = False
    reject_token: bool = False
    throttle_next: int = 0
    throttle_edits: int = 0
    created: list[CreatedMessage] = field(default_factory=list)
    timeline: list[Event] = field(default_factory=list)
    channel_messages: dict[tuple[int, str], str] = field(default_factory=dict)
    interaction_responses: list[dict[str, Any]] = field(default_factory=list)  # {"id", "type", "data"}
    _interactions: dict[str, str] = field(default_factory=dict)  # id -> token, until answered
    typing: list[int] = field(default_factory=list)
    identifies: int = 0
    cdn: dict[str, CdnFile] = field(default_factory=dict)  # path -> file
    cdn_requests: list[str] = field(default_factory=list)
    uploads: list[tuple[int, str, bytes]] = field(default_factory=list)  # (channel, filename, bytes) sent as files
    resumes: int = 0
    _sockets: list[web.WebSocketResponse] = field(default_factory=list)
    _seq: int = 0
    _session_id: str = ""
    _log: list[dict[str, Any]] = field(default_factory=list)  # dispatched events for RESUME replay
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/gateway", self._gateway)
        router.add_get("/gateway/", self._gateway)
        router.add_get("/api/v10/users/@me", self._me)
        router.add_get("/api/v10/oauth2/applications/@me", self._application)
        router.add_get("/api/v10/gateway", self._gateway_info)
        router.add_get("/api/v10/gateway/bot", self._gateway_info)
        router.add_post("/api/v10/channels/{cid}/typing", self._typing)
        router.add_post("/api/v10/channels/{cid}/messages", self._create_message)
        router.add_patch("/api/v10/channels/{cid}/messages/{mid}", self._edit_message)
        router.add_post("/api/v10/interactions/{iid}/{itoken}/callback", self._interaction_callback)
        router.add_delete("/api/v10/channels/{cid}/messages/{mid}", self._delete_message)
        router.add_get("/attachments/{cid}/{aid}/{name}", self._cdn_get)

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return self.base_url.replace("http://", "ws://") + "/gateway"

    async def close(self) -> None:
        await self.drop(code=1001)
        await super().close()

    async def drop(self, code: int = 4000) -> None:
        """Close every gateway connection (the client should RESUME or reconnect)."""
        self._ready.clear()
        for ws in list(self._sockets):
            await ws.close(code=code)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        await asyncio.wait_for(self._ready.wait(), timeout)

    # ------------------------------------------------------------------------------------ REST
    def _authorized(self, request: web.Request) -> bool:
        return not self.reject_token and request.headers.get("Authorization") == f"Bot {self.token}"

    async def _me(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        return _json({**user_payload(BOT_ID, BOT_NAME, bot=True), "verified": True, "flags": 0, "mfa_enabled": False})

    async def _application(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        return _json({"id": str(BOT_ID), "name": BOT_NAME, "description": "", "icon": None, "bot_public": False,
                      "bot_require_code_grant": False, "owner": user_payload(1, "owner"), "verify_key": "00",
                      "flags": 0, "summary": "", "team": None})

    async def _gateway_info(self, request: web.Request) -> web.Response:
        return _json({"url": self.gateway_url, "shards": 1,
                      "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0,
                                              "max_concurrency": 1}})

    async def _typing(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        self.typing.append(int(request.match_info["cid"]))
        return web.Response(status=204)

    async def _create_message(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        if self.throttle_next > 0:
            self.throttle_next -= 1
            return _json({"message": "You are being rate limited.", "retry_after": 0.05, "global": False},
                         status=429, headers={"Via": "1.1 google", "X-RateLimit-Limit": "5",
                                              "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "0.05",
                                              "X-RateLimit-Bucket": "fake", "Retry-After": "1"})
        files: list[tuple[str, bytes]] = []
        if request.content_type.startswith("multipart/"):  # a message with files: payload_json + files[n]
            form = await request.post()
            data = json.loads(str(form.get("payload_json") or "{}"))
            files = [(f.filename, f.file.read()) for k, f in form.items()
                     if k.startswith("files[") and isinstance(f, web.FileField)]
        else:
            data = await request.json()
        content = data.get("content") or ""
        if len(content) > 2000:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        cid = int(request.match_info["cid"])
        self.uploads.extend((cid, name, body) for name, body in files)
        ref = (data.get("message_reference") or {}).get("message_id")
        payload = self._message(cid, user_payload(BOT_ID, BOT_NAME, bot=True), content,
                                components=data.get("components") or [])
        self.created.append(CreatedMessage(cid, content, str(ref) if ref else None, data.get("components"),
                                           payload["id"]))
        self.channel_messages[(cid, payload["id"])] = content
        self.timeline.append(Event(time.monotonic(), "create", cid, payload["id"], content))
        return _json(payload)

    async def _edit_message(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        cid, mid = int(request.match_info["cid"]), request.match_info["mid"]
        if self.throttle_edits > 0:
            self.throttle_edits -= 1
            self.timeline.append(Event(time.monotonic(), "429 edit", cid, mid, ""))
            return _json({"message": "You are being rate limited.", "retry_after": 0.3, "global": False},
                         status=429, headers={"Via": "1.1 google", "X-RateLimit-Limit": "5",
                                              "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "0.3",
                                              "X-RateLimit-Bucket": "fake-edit", "Retry-After": "1"})
        if (cid, mid) not in self.channel_messages:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        content = (await request.json()).get("content") or ""
        if len(content) > 2000:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        self.channel_messages[(cid, mid)] = content
        self.timeline.append(Event(time.monotonic(), "edit", cid, mid, content))
        payload = self._message(cid, user_payload(BOT_ID, BOT_NAME, bot=True), content,
                                edited_timestamp=datetime.now(UTC).isoformat())
        payload["id"] = mid
        return _json(payload)

    async def _delete_message(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        cid, mid = int(request.match_info["cid"]), request.match_info["mid"]
        if self.channel_messages.pop((cid, mid), None) is None:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        self.timeline.append(Event(time.monotonic(), "delete", cid, mid, ""))
        return web.Response(status=204)

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        iid, itoken = request.match_info["iid"], request.match_info["itoken"]
        if self._interactions.get(iid) != itoken:
            return _json({"message": "Unknown interaction", "code": 10062}, status=404)
        del self._interactions[iid]  # an interaction is answered once
        body = await request.json()
        self.interaction_responses.append({"id": iid, **body})
        return _json({"interaction": {"id": iid, "type": 3}})

    async def press(self, *, user_id: int, message: CreatedMessage, custom_id: str, name: str = "ada") -> str:
        """``user_id`` presses the button ``custom_id`` under ``message`` (INTERACTION_CREATE); its id."""
        iid, itoken = snowflake(), f"itoken-{snowflake()}"
        self._interactions[iid] = itoken
        user = user_payload(user_id, name)
        bot_message = self._message(message.channel_id, user_payload(BOT_ID, BOT_NAME, bot=True), message.content,
                                    components=message.components or [])
        bot_message["id"] = message.message_id
        payload: dict[str, Any] = {
            "id": iid, "application_id": str(BOT_ID), "type": 3, "token": itoken, "version": 1,
            "data": {"custom_id": custom_id, "component_type": 2}, "channel_id": str(message.channel_id),
            "message": bot_message, "locale": "en-US", "app_permissions": "0", "entitlements": [],
            "authorizing_integration_owners": {}, "attachment_size_limit": 26214400,
        }
        if message.channel_id == TEXT_CHANNEL_ID:
            payload |= {"guild_id": str(GUILD_ID), "context": 0,
                        "channel": {"id": str(TEXT_CHANNEL_ID), "type": 0, "guild_id": str(GUILD_ID),
                                    "name": "general", "position": 0, "permission_overwrites": [], "nsfw": False,
                                    "parent_id": None},
                        "member": {"user": user, "roles": [], "joined_at": datetime.now(UTC).isoformat(),
                                   "deaf": False, "mute": False, "flags": 0, "permissions": "0"}}
        else:
            payload |= {"user": user, "context": 1,
                        "channel": {"id": str(message.channel_id), "type": 1, "recipients": [user], "flags": 0}}
        await self.dispatch("INTERACTION_CREATE", payload)
        return iid

    def shown(self, channel_id: int) -> list[str]:
        """What the channel shows now, oldest message first."""
        return [text for (cid, mid), text in sorted(self.channel_messages.items(), key=lambda kv: int(kv[0][1]))
                if cid == channel_id]

    async def wait_created(self, count: int, timeout: float = 30.0) -> list[CreatedMessage]:
        return await arrived(self.created, count, "messages created", timeout)

    # ------------------------------------------------------------------------------------- CDN
    @staticmethod
    def _signature(path: str) -> str:
        return hashlib.sha256(path.encode()).hexdigest()[:32]

    async def _cdn_get(self, request: web.Request) -> web.StreamResponse:
        self.cdn_requests.append(request.path)
        if "authorization" in {k.lower() for k in request.headers}:
            return web.Response(status=400)  # the CDN needs no token; sending one would leak it
        stored = self.cdn.get(request.path)
        if stored is None or request.query.get("hm") != self._signature(request.path):
            return web.Response(status=404, text="This content is no longer available.")
        if not stored.chunked:
            return web.Response(body=stored.data, headers={"Content-Type": stored.content_type})
        resp = web.StreamResponse(headers={"Content-Type": stored.content_type})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(stored.data), 65536):
            await resp.write(stored.data[i : i + 65536])
        await resp.write_eof()
        return resp

    def attachment(self, data: bytes, *, filename: str, content_type: str, channel_id: int,
                   declared_size: int | None = None, chunked: bool = False, **extra: Any) -> dict[str, Any]:
        """Store ``data`` on the CDN; the attachment object for a message's ``attachments`` list."""
        aid = snowflake()
        path = f"/attachments/{channel_id}/{aid}/{filename}"
        self.cdn[path] = CdnFile(data, content_type, chunked)
        query = f"?ex=6760d2a1&is=675f8121&hm={self._signature(path)}&"
        return {"id": aid, "filename": filename, "size": len(data) if declared_size is None else declared_size,
                "url": f"{self.base_url}{path}{query}", "proxy_url": f"{self.base_url}{path}{query}",
                "content_type": content_type, **extra}

    # --------------------------------------------------------------------------------- gateway
    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        try:
            await ws.send_json({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}, "s": None,
                                "t": None})
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                op = frame.get("op")
                if self.silent:
                    continue  # zombie: the socket stays open, nothing comes back
                if op == 1:
                    await ws.send_json({"op": 11, "d": None, "s": None, "t": None})
                elif op == 2:
                    await self._identify(ws, frame["d"])
                elif op == 6:
                    await self._resume(ws, frame["d"])
        finally:
            self._sockets.remove(ws)
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.identifies += 1
        if self.reject_token or data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        self._session_id = snowflake()
        self._log.clear()
        await self._dispatch_to(ws, "READY", {
            "v": 10,
            "user": {**user_payload(BOT_ID, BOT_NAME, bot=True), "verified": True, "flags": 0},
            "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
            "session_id": self._session_id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(BOT_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
        })
        await self._dispatch_to(ws, "GUILD_CREATE", self._guild())
        self._ready.set()

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.resumes += 1
        if self.reject_token or data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        if data.get("session_id") != self._session_id:
            await ws.send_json({"op": 9, "d": False, "s": None, "t": None})  # invalid session: IDENTIFY
            return
        last = int(data.get("seq") or 0)
        for frame in self._log:
            if frame["s"] > last:
                await ws.send_json(frame)
        await self._dispatch_to(ws, "RESUMED", {})
        self._ready.set()

    async def _dispatch_to(self, ws: web.WebSocketResponse, event: str, data: dict[str, Any]) -> None:
        self._seq += 1
        frame = {"op": 0, "t": event, "s": self._seq, "d": data}
        if event == "MESSAGE_CREATE":
            self._log.append(frame)
        await ws.send_json(frame)

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send an event on every live connection (or only log it for a RESUME if none is up)."""
        live = [ws for ws in self._sockets if not ws.closed]
        if not live:
            self._seq += 1
            self._log.append({"op": 0, "t": event, "s": self._seq, "d": data})
            return
        for ws in live:
            await self._dispatch_to(ws, event, data)

    # ----------------------------------------------------------------------------- test drivers
    def _guild(self) -> dict[str, Any]:
        gid = str(GUILD_ID)
        return {
            "id": gid, "name": "Test Guild", "icon": None, "owner_id": "1", "afk_timeout": 300,
            "verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
            "mfa_level": 0, "nsfw_level": 0, "premium_tier": 0, "system_channel_flags": 0,
            "roles": [{"id": gid, "name": "@everyone", "permissions": "68608", "position": 0, "color": 0,
                       "hoist": False, "managed": False, "mentionable": False, "flags": 0}],
            "emojis": [], "stickers": [], "features": [], "members": [], "presences": [], "voice_states": [],
            "member_count": 2, "large": False, "unavailable": False, "joined_at": datetime.now(UTC).isoformat(),
            "channels": [{"id": str(TEXT_CHANNEL_ID), "type": 0, "name": "general", "position": 0,
                          "guild_id": gid, "permission_overwrites": [], "nsfw": False, "parent_id": None}],
            "threads": [{"id": str(THREAD_ID), "type": 11, "name": "a thread", "parent_id": str(TEXT_CHANNEL_ID),
                         "guild_id": gid, "owner_id": "1", "message_count": 0, "member_count": 1,
                         "thread_metadata": {"archived": False, "auto_archive_duration": 60, "locked": False,
                                             "archive_timestamp": datetime.now(UTC).isoformat()}}],
        }

    @staticmethod
    def _message(channel_id: int, author: dict[str, Any], content: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": snowflake(), "channel_id": str(channel_id), "author": author, "content": content,
            "timestamp": datetime.now(UTC).isoformat(), "edited_timestamp": None, "tts": False,
            "mention_everyone": False, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
            "pinned": False, "type": 0, "flags": 0, **extra,
        }

    def message(
        self,
        *,
        user_id: int,
        content: str,
        channel_id: int | None = None,
        guild: bool = False,
        mention_bot: bool = False,
        name: str = "ada",
        bot_author: bool = False,
        message_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A MESSAGE_CREATE payload: a DM (channel = the user's DM channel) unless ``guild``."""
        cid = channel_id if channel_id is not None else (TEXT_CHANNEL_ID if guild else user_id + 1)
        payload = self._message(cid, user_payload(user_id, name, bot=bot_author), content, **extra)
        if message_id:
            payload["id"] = message_id
        if guild:
            payload["guild_id"] = str(GUILD_ID)
            payload["member"] = {"roles": [], "joined_at": datetime.now(UTC).isoformat(), "deaf": False,
                                 "mute": False, "flags": 0}
        if mention_bot:
            payload["content"] = f"<@{BOT_ID}> {content}"
            payload["mentions"] = [user_payload(BOT_ID, BOT_NAME, bot=True)]
        return payload

    async def say(self, **kwargs: Any) -> dict[str, Any]:
        payload = self.message(**kwargs)
        await self.dispatch("MESSAGE_CREATE", payload)
        return payload
