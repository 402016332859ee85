"""A local Matrix homeserver speaking the client-server API to mautrix, for the bot's account only.

``/sync`` long-polls with ``since``/``timeout`` and answers ``next_batch`` (``s<n>``, the position in
the fake's event log) with ``rooms.join``/``rooms.invite``/``account_data`` built from what happened
after ``since``, as a real server does; the bot's own sends come back in the timeline. ``/send`` is
idempotent per transaction id. Media: ``POST /_matrix/media/v3/upload`` stores bytes under a new
``mxc://`` URI, ``GET /_matrix/client/v1/media/download/<server>/<id>`` (authenticated) serves them.
Errors have the spec's shape (``errcode``, 401 ``M_UNKNOWN_TOKEN``, 429 ``M_LIMIT_EXCEEDED``).
Streaming: edits are sends with ``m.relates_to.rel_type`` ``m.replace``; ``shown(room)`` applies them,
``PUT .../redact/<event>/<txn>`` is recorded in ``redacted``.
Switches: ``revoke()``, ``throttle_next``, ``failing_syncs``, ``stalled``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.serve import FakeServer, arrived

SERVER = "fake.test"
BOT = f"@kith:{SERVER}"


@dataclass
class FakeHomeserver(FakeServer):
    token: str
    user_id: str = BOT
    revoked: bool = False
    throttle_next: int = 0
    failing_syncs: int = 0  # the next /sync calls answer 502, as a homeserver behind a restarting proxy
    stalled: bool = False  # /sync holds the connection and never answers
    sent: list[dict[str, Any]] = field(default_factory=list)  # {"room", "content", "event_id", "txn", "at"}
    refused: list[float] = field(default_factory=list)  # when a send was answered 429
    redacted: list[str] = field(default_factory=list)  # event ids
    joined: list[str] = field(default_factory=list)
    typing: list[tuple[str, bool]] = field(default_factory=list)
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # media id -> (bytes, content type)
    uploads: list[str] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    syncs: list[str | None] = field(default_factory=list)  # the since of every /sync
    _log: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (section, room, event)
    _txns: dict[str, str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Condition | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> str:
        self._changed = asyncio.Condition()
        return await super().start()

    async def close(self) -> None:
        self._closing.set()
        await super().close()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        c = "/_matrix/client"
        router.add_get(f"{c}/versions", self._versions)
        router.add_get(f"{c}/v3/account/whoami", self._whoami)
        router.add_get(f"{c}/v3/sync", self._sync)
        router.add_put(f"{c}/v3/rooms/{{room}}/send/{{type}}/{{txn}}", self._send)
        router.add_put(f"{c}/v3/rooms/{{room}}/typing/{{user}}", self._typing)
        router.add_put(f"{c}/v3/rooms/{{room}}/redact/{{event}}/{{txn}}", self._redact)
        router.add_post(f"{c}/v3/rooms/{{room}}/join", self._join)
        router.add_post(f"{c}/v3/join/{{room}}", self._join)
        router.add_post("/_matrix/media/v3/upload", self._upload)
        router.add_get(f"{c}/v1/media/download/{{server}}/{{media}}", self._download)

    # ----------------------------------------------------------------------------- test helpers
    def revoke(self) -> None:
        self.revoked = True

    async def _append(self, section: str, room: str, event: dict[str, Any]) -> None:
        assert self._changed is not None
        async with self._changed:
            self._log.append((section, room, event))
            self._changed.notify_all()

    async def say(self, room: str, sender: str, body: str = "", *, msgtype: str = "m.text", **content: Any) -> str:
        """``sender`` posts to ``room``; the event id."""
        event_id = f"$ev{next(self._ids)}"
        await self._append("timeline", room, {
            "type": "m.room.message", "sender": sender, "event_id": event_id, "origin_server_ts": 1_700_000_000_000,
            "content": {"msgtype": msgtype, "body": body, **content}})  # fmt: skip
        return event_id

    async def raw_event(self, room: str, event: dict[str, Any]) -> None:
        await self._append("timeline", room, event)

    async def invite(self, room: str, sender: str, *, is_direct: bool) -> None:
        await self._append("invite", room, {"type": "m.room.member", "sender": sender, "state_key": self.user_id,
                                            "content": {"membership": "invite", "is_direct": is_direct}})

    async def direct(self, mapping: dict[str, list[str]]) -> None:
        await self._append("account_data", "", {"type": "m.direct", "content": mapping})

    def add_media(self, data: bytes, content_type: str) -> str:
        media_id = f"m{next(self._ids)}"
        self.media[media_id] = (data, content_type)
        return f"mxc://{SERVER}/{media_id}"

    async def wait_sent(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return await arrived(self.sent, count, "events sent by the bot", timeout)

    # ---------------------------------------------------------------------------------- protocol
    def _auth(self, request: web.Request) -> web.Response | None:
        got = request.headers.get("Authorization", "")
        if self.revoked or got != f"Bearer {self.token}":
            return _error(401, "M_UNKNOWN_TOKEN", "Invalid access token passed.")
        return None

    async def _versions(self, request: web.Request) -> web.Response:
        return web.json_response({"versions": ["v1.9", "v1.10", "v1.11"], "unstable_features": {}})

    async def _whoami(self, request: web.Request) -> web.Response:
        return self._auth(request) or web.json_response({"user_id": self.user_id, "device_id": "KITHDEV"})

    async def _sync(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        since = request.query.get("since")
        self.syncs.append(since)
        if self.failing_syncs > 0:
            self.failing_syncs -= 1
            return _error(502, "M_UNKNOWN", "Bad gateway")
        if self.stalled:
            # Never answered, even after un-stalling, like a dead TCP connection; close() releases it.
            await self._closing.wait()
        start = int(since[1:]) if since and since.startswith("s") and since[1:].isdigit() else 0
        timeout_ms = int(request.query.get("timeout", "0") or 0)
        assert self._changed is not None
        async with self._changed:
            if len(self._log) <= start and timeout_ms > 0:
                try:
                    await asyncio.wait_for(self._changed.wait_for(lambda: len(self._log) > start), timeout_ms / 1000)
                except TimeoutError:
                    pass
            end = len(self._log)
            return web.json_response({"next_batch": f"s{end}", **_sync_body(self._log[start:end])})

    async def _send(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        if self.throttle_next > 0:
            self.throttle_next -= 1
            self.refused.append(time.monotonic())
            return _error(429, "M_LIMIT_EXCEEDED", "Too many requests", retry_after_ms=50)
        txn = request.match_info["txn"]
        room = request.match_info["room"]
        if txn in self._txns:
            return web.json_response({"event_id": self._txns[txn]})
        content = await request.json()
        event_id = self._txns[txn] = f"$ev{next(self._ids)}"
        self.sent.append({"room": room, "content": content, "event_id": event_id, "txn": txn, "at": time.monotonic()})
        await self._append("timeline", room, {"type": request.match_info["type"], "sender": self.user_id,
                                              "event_id": event_id, "content": content})
        return web.json_response({"event_id": event_id})

    async def _redact(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        self.redacted.append(request.match_info["event"])
        return web.json_response({"event_id": f"$ev{next(self._ids)}"})

    def shown(self, room: str) -> list[str]:
        """What the room shows of the bot's messages: each one's latest edit (``m.replace``), not redacted."""
        bodies: dict[str, str] = {}
        for sent in self.sent:
            if sent["room"] != room:
                continue
            content = sent["content"]
            relation = content.get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace":
                bodies[relation["event_id"]] = content["m.new_content"]["body"]
            else:
                bodies[sent["event_id"]] = content["body"]
        return [body for event_id, body in bodies.items() if event_id not in self.redacted]

    async def _typing(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        body = await request.json()
        self.typing.append((request.match_info["room"], bool(body.get("typing"))))
        return web.json_response({})

    async def _join(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        room = request.match_info["room"]
        self.joined.append(room)
        await self._append("state", room, {"type": "m.room.member", "sender": self.user_id,
                                           "state_key": self.user_id, "event_id": f"$ev{next(self._ids)}",
                                           "content": {"membership": "join", "displayname": "kith"}})
        return web.json_response({"room_id": room})

    async def _upload(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        data = await request.read()
        mxc = self.add_media(data, request.headers.get("Content-Type", "application/octet-stream"))
        self.uploads.append(request.query.get("filename", ""))
        return web.json_response({"content_uri": mxc})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._auth(request)) is not None:
            return refused
        item = self.media.get(request.match_info["media"]) if request.match_info["server"] == SERVER else None
        if item is None:
            return _error(404, "M_NOT_FOUND", "Not found")
        self.downloads.append(request.match_info["media"])
        return web.Response(body=item[0], content_type=item[1])


def _sync_body(entries: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    join: dict[str, Any] = {}
    invite: dict[str, Any] = {}
    account: list[dict[str, Any]] = []
    for section, room, event in entries:
        if section == "account_data":
            account.append(event)
        elif section == "invite":
            invite.setdefault(room, {"invite_state": {"events": []}})["invite_state"]["events"].append(event)
        else:
            joined = join.setdefault(room, {"state": {"events": []}, "timeline": {"events": [], "limited": False}})
            joined[section]["events"].append(event)
    return {"rooms": {"join": join, "invite": invite, "leave": {}}, "account_data": {"events": account}}


def _error(status: int, errcode: str, message: str, **extra: Any) -> web.Response:
    return web.json_response({"errcode": errcode, "error": message, **extra}, status=status)
