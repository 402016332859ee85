"""A local Nextcloud Talk server, as far as a bot sees it.

* It *sends* webhooks the way Talk does: an ActivityStreams 2.0 ``Create`` body, signed with
  HMAC-SHA256(secret, random + raw body) in ``X-Nextcloud-Talk-Signature``.
* It *receives* the bot's OCS calls (``/ocs/v2.php/apps/spreed/api/v1/bot/<room>/message`` and
  ``.../reaction/<id>``), verifies ``X-Nextcloud-Talk-Bot-Signature`` over random + message (or
  reaction) exactly as Talk does, and answers 401 on a mismatch and 201 otherwise.
* ``GET /ocs/v2.php/apps/spreed/api/v4/room/<token>`` with basic auth returns the room type.
* Files shared into a room (``share_file``): the webhook (an ``Activity`` named ``file_shared``)
  carries the ``{file}`` rich object Talk builds for bots, and every user the share reaches sees the
  file in their own tree (under ``Talk/``). WebDAV as Nextcloud serves it: ``SEARCH /remote.php/dav/`` (basicsearch on
  ``oc:fileid`` within ``/files/<user>``) answers a 207 multistatus, ``GET
  /remote.php/dav/files/<user>/<path>`` the bytes; both need the user's basic auth.
* The chat API as the API user sees it (basic auth): ``GET /ocs/v2.php/cloud/capabilities`` lists
  ``features`` (``edit-messages`` unless a test takes it away); ``POST .../api/v1/chat/<room>`` posts a
  message and answers it with its id, ``PUT .../chat/<room>/<id>`` edits it, ``DELETE`` the same path
  deletes it. ``throttle_chat`` answers that many of the next chat calls 429 with ``Retry-After: 1``,
  ``refuse_edits`` that many edits 400.
  Like Talk, a message the API user posts is sent to the bot as a webhook (``echo_to``: the session
  and URL to deliver it with), before the post is answered. ``timeline`` records every post (bot and
  chat), edit and delete (and 429) with its arrival time; ``shown(room)`` is what the room shows now.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import secrets
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web

from tests.fakes.serve import FakeServer, arrived


def sign(secret: str, random: str, payload: bytes) -> str:
    return hmac.new(secret.encode(), random.encode() + payload, hashlib.sha256).hexdigest()


@dataclass
class Posted:
    room: str
    message: str
    reply_to: int | None
    reference_id: str


@dataclass
class Event:
    at: float
    method: str  # "bot post", "chat post", "edit", "delete", "429 <method>"
    room: str
    message_id: int
    text: str
    reply_to: int | None = None  # a post's replyTo


@dataclass
class NcFile:
    file_id: int
    data: bytes
    mimetype: str
    declared_size: int
    chunked: bool = False


_DAV_NS = {"d": "DAV:", "oc": "http://owncloud.org/ns"}


@dataclass
class FakeNextcloud(FakeServer):
    secret: str
    bot_url: str = ""  # where to deliver webhooks (the gateway's webhook route)
    room_types: dict[str, int] = field(default_factory=dict)  # token -> Talk room type
    api_credentials: tuple[str, str] = ("kithbot", "app-password")
    posted: list[Posted] = field(default_factory=list)
    reactions: list[tuple[str, str, str]] = field(default_factory=list)
    bad_signatures: int = 0
    throttle_next: int = 0  # answer this many bot posts with 429 first
    trees: dict[str, dict[str, NcFile]] = field(default_factory=dict)  # user -> path in their files -> file
    dav_requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    features: list[str] = field(default_factory=lambda: ["bots-v1", "chat-reference-id", "edit-messages"])
    throttle_chat: int = 0  # answer this many chat-API calls (post, edit, delete) with 429 first
    refuse_edits: int = 0  # answer this many edits 400, as Talk does for a message it will not change
    echo_to: tuple[Any, str] | None = None  # (session, bot URL): send the API user's posts to the bot
    timeline: list[Event] = field(default_factory=list)
    room_messages: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (room, text) shown
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    _file_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(50_000))

    # ------------------------------------------------------------------------------- the server
    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/ocs/v2.php/apps/spreed/api/v1/bot/{room}/message", self._message)
        router.add_post("/ocs/v2.php/apps/spreed/api/v1/bot/{room}/reaction/{mid}", self._reaction)
        router.add_get("/ocs/v2.php/apps/spreed/api/v4/room/{room}", self._room)
        router.add_get("/ocs/v2.php/cloud/capabilities", self._capabilities)
        router.add_post("/ocs/v2.php/apps/spreed/api/v1/chat/{room}", self._chat_post)
        router.add_put("/ocs/v2.php/apps/spreed/api/v1/chat/{room}/{mid}", self._chat_edit)
        router.add_delete("/ocs/v2.php/apps/spreed/api/v1/chat/{room}/{mid}", self._chat_delete)
        router.add_route("SEARCH", "/remote.php/dav/", self._dav_search)
        router.add_get("/remote.php/dav/files/{user}/{path:.+}", self._dav_get)

    def _verify(self, request: web.Request, signed: str) -> bool:
        random = request.headers.get("X-Nextcloud-Talk-Bot-Random", "")
        got = request.headers.get("X-Nextcloud-Talk-Bot-Signature", "")
        ok = bool(random) and hmac.compare_digest(sign(self.secret, random, signed.encode()), got.lower())
        ok = ok and request.headers.get("OCS-APIRequest") == "true"
        if not ok:
            self.bad_signatures += 1
        return ok

    async def _message(self, request: web.Request) -> web.Response:
        data = await request.json()
        if not isinstance(data.get("message"), str) or not self._verify(request, data["message"]):
            return web.json_response({"ocs": {"meta": {"status": "failure", "statuscode": 401}}}, status=401)
        if len(data["message"]) > 32000:
            return web.Response(status=413)
        if self.throttle_next > 0:
            self.throttle_next -= 1
            return web.Response(status=429, headers={"Retry-After": "0.05"})
        room, mid = request.match_info["room"], next(self._ids)
        self.posted.append(Posted(room, data["message"], data.get("replyTo"), data.get("referenceId", "")))
        self.room_messages[mid] = (room, data["message"])
        self.timeline.append(Event(time.monotonic(), "bot post", room, mid, data["message"], data.get("replyTo")))
        return web.json_response({"ocs": {"meta": {"status": "ok", "statuscode": 201}, "data": []}}, status=201)

    async def _reaction(self, request: web.Request) -> web.Response:
        data = await request.json()
        if not isinstance(data.get("reaction"), str) or not self._verify(request, data["reaction"]):
            return web.Response(status=401)
        self.reactions.append((request.match_info["room"], request.match_info["mid"], data["reaction"]))
        return web.json_response({"ocs": {"meta": {"status": "ok", "statuscode": 201}, "data": []}}, status=201)

    async def _room(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        expected = "Basic " + base64.b64encode(":".join(self.api_credentials).encode()).decode()
        if not hmac.compare_digest(auth, expected):
            return web.Response(status=401)
        room = request.match_info["room"]
        if room not in self.room_types:
            return web.Response(status=404)
        data = {"token": room, "type": self.room_types[room], "name": room}
        return web.json_response({"ocs": {"meta": {"status": "ok", "statuscode": 200}, "data": data}})

    # ------------------------------------------------------------------------ the chat API (a user)
    def _ocs(self, status: int, data: Any = None) -> web.Response:
        meta = {"status": "ok" if status < 400 else "failure", "statuscode": status}
        return web.json_response({"ocs": {"meta": meta, "data": data if data is not None else []}}, status=status)

    def _chat_refused(self, request: web.Request, method: str) -> web.Response | None:
        if self._dav_user(request) is None or request.headers.get("OCS-APIRequest") != "true":
            return self._ocs(401)
        if self.throttle_chat > 0:
            self.throttle_chat -= 1
            self.timeline.append(Event(time.monotonic(), f"429 {method}", request.match_info["room"],
                                       int(request.match_info.get("mid", 0)), ""))
            return web.Response(status=429, headers={"Retry-After": "1"})
        return None

    async def _capabilities(self, request: web.Request) -> web.Response:
        if self._dav_user(request) is None:
            return self._ocs(401)
        spreed = {"features": list(self.features), "config": {"chat": {"max-length": 32000}}}
        return self._ocs(200, {"version": {"major": 31}, "capabilities": {"spreed": spreed}})

    async def _chat_post(self, request: web.Request) -> web.Response:
        if (refused := self._chat_refused(request, "chat post")) is not None:
            return refused
        data = await request.json()
        room, text = request.match_info["room"], data.get("message")
        if not isinstance(text, str) or not text.strip():
            return self._ocs(400)
        if len(text) > 32000:
            return self._ocs(413)
        mid = next(self._ids)
        self.room_messages[mid] = (room, text)
        self.timeline.append(Event(time.monotonic(), "chat post", room, mid, text, data.get("replyTo")))
        user = self.api_credentials[0]
        if self.echo_to is not None:  # Talk tells its bots about every message, this one too
            session, url = self.echo_to
            await self.say(session, room=room, user=user, text=text, url=url, message_id=mid)
        message = {"id": mid, "token": room, "actorType": "users", "actorId": user, "message": text,
                   "messageType": "comment", "referenceId": data.get("referenceId", ""),
                   "timestamp": int(time.time()), "markdown": True}
        return self._ocs(201, message)

    async def _chat_edit(self, request: web.Request) -> web.Response:
        if (refused := self._chat_refused(request, "edit")) is not None:
            return refused
        room, mid = request.match_info["room"], int(request.match_info["mid"])
        text = (await request.json()).get("message")
        if self.room_messages.get(mid, ("", ""))[0] != room:
            return self._ocs(404)
        if self.refuse_edits > 0:
            self.refuse_edits -= 1
            self.timeline.append(Event(time.monotonic(), "400 edit", room, mid, ""))
            return self._ocs(400)
        if not isinstance(text, str) or not text.strip():
            return self._ocs(400)
        if len(text) > 32000:
            return self._ocs(413)
        self.room_messages[mid] = (room, text)
        self.timeline.append(Event(time.monotonic(), "edit", room, mid, text))
        return self._ocs(200, {"id": mid, "message": text})

    async def _chat_delete(self, request: web.Request) -> web.Response:
        if (refused := self._chat_refused(request, "delete")) is not None:
            return refused
        room, mid = request.match_info["room"], int(request.match_info["mid"])
        if self.room_messages.get(mid, ("", ""))[0] != room:
            return self._ocs(404)
        del self.room_messages[mid]
        self.timeline.append(Event(time.monotonic(), "delete", room, mid, ""))
        return self._ocs(200, {"id": mid})

    def shown(self, room: str) -> list[str]:
        """What ``room`` shows now, oldest message first (the bot's posts and the API user's)."""
        return [text for mid, (r, text) in sorted(self.room_messages.items()) if r == room]

    # ---------------------------------------------------------------------------------- WebDAV
    def _dav_user(self, request: web.Request) -> str | None:
        """The user whose basic auth is right, or None (only the API user has a password here)."""
        auth = request.headers.get("Authorization", "")
        expected = "Basic " + base64.b64encode(":".join(self.api_credentials).encode()).decode()
        return self.api_credentials[0] if hmac.compare_digest(auth, expected) else None

    async def _dav_search(self, request: web.Request) -> web.Response:
        self.dav_requests.append(("SEARCH", request.path))
        user = self._dav_user(request)
        if user is None:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="Nextcloud"'})
        try:
            query = ET.fromstring(await request.read())
            scope = query.findtext(".//d:scope/d:href", namespaces=_DAV_NS) or ""
            literal = query.findtext(".//d:where/d:eq/d:literal", namespaces=_DAV_NS) or ""
        except ET.ParseError:
            return web.Response(status=400)
        if scope.rstrip("/") != f"/files/{user}":
            return web.Response(status=403)  # a user can only search their own tree
        hits = [(path, f) for path, f in self.trees.get(user, {}).items() if str(f.file_id) == literal.strip()]
        responses = "".join(
            f"<d:response><d:href>/remote.php/dav/files/{quote(user)}/{quote(path)}</d:href><d:propstat><d:prop>"
            f"<oc:fileid>{f.file_id}</oc:fileid><d:getcontentlength>{f.declared_size}</d:getcontentlength>"
            f"<d:getcontenttype>{f.mimetype}</d:getcontenttype></d:prop>"
            "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
            for path, f in hits
        )
        body = ('<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns" '
                f'xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns">{responses}</d:multistatus>')
        return web.Response(status=207, body=body.encode(), content_type="application/xml", charset="utf-8")

    async def _dav_get(self, request: web.Request) -> web.StreamResponse:
        self.dav_requests.append(("GET", request.path))
        user = self._dav_user(request)
        if user is None:
            return web.Response(status=401)
        if request.match_info["user"] != user:
            return web.Response(status=404)
        stored = self.trees.get(user, {}).get(unquote(request.match_info["path"]))
        if stored is None:
            return web.Response(status=404)
        if not stored.chunked:
            return web.Response(body=stored.data, headers={"Content-Type": stored.mimetype})
        resp = web.StreamResponse(headers={"Content-Type": stored.mimetype})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(stored.data), 65536):
            await resp.write(stored.data[i : i + 65536])
        await resp.write_eof()
        return resp

    def share_file(
        self,
        data: bytes,
        *,
        name: str,
        mimetype: str,
        owner: str = "ada",
        shared_with: tuple[str, ...] | None = None,
        declared_size: int | None = None,
        chunked: bool = False,
    ) -> dict[str, Any]:
        """Share a file of ``owner`` into a room; the ``parameters`` of the webhook Talk then sends.

        ``shared_with``: users who see it (default: the API user, a member of the room)."""
        size = len(data) if declared_size is None else declared_size
        stored = NcFile(next(self._file_ids), data, mimetype, size, chunked)
        self.trees.setdefault(owner, {})[f"Documents/{name}"] = stored
        for user in shared_with if shared_with is not None else (self.api_credentials[0],):
            self.trees.setdefault(user, {})[f"Talk/{name}"] = stored
        base = self.base_url or "http://nextcloud.invalid"
        # Rendered for no participant (what bots get): the path is the bare name, the link the room
        # share's link; only the file id says which file it is.
        file_param = {
            "type": "file", "id": str(stored.file_id), "name": name, "size": str(size), "path": name,
            "link": f"{base}/index.php/s/{secrets.token_hex(8)}", "etag": hashlib.md5(data).hexdigest(),
            "permissions": "27", "mimetype": mimetype,
            "preview-available": "yes" if mimetype.startswith("image/") else "no", "hide-download": "no",
        }
        return {"actor": {"type": "user", "id": owner, "name": owner.title(), "mention-id": owner},
                "file": file_param}

    async def wait_posts(self, count: int, timeout: float = 30.0) -> list[Posted]:
        return await arrived(self.posted, count, "messages posted", timeout)

    # ----------------------------------------------------------------------------- the webhooks
    def payload(
        self,
        *,
        room: str,
        user: str,
        text: str,
        name: str = "",
        message_id: int | None = None,
        parameters: dict[str, Any] | None = None,
        actor_type: str = "Person",
        room_name: str = "",
        event: str = "Create",
        note_name: str = "message",
    ) -> dict[str, Any]:
        """A webhook body. A file share is ``event="Activity", note_name="file_shared"`` (a system
        message, as current Talk sends it to bots); a chat message is the default ``Create``."""
        content = json.dumps({"message": text, "parameters": parameters or {}})
        return {
            "type": event,
            "actor": {"type": actor_type, "id": f"users/{user}", "name": name or user},
            "object": {
                "type": "Note",
                "id": str(message_id if message_id is not None else next(self._ids)),
                "name": note_name,
                "content": content,
                "mediaType": "text/markdown",
            },
            "target": {"type": "Collection", "id": room, "name": room_name or room},
        }

    def signed_headers(self, body: bytes, *, random: str | None = None) -> dict[str, str]:
        random = random or secrets.token_hex(32)
        return {
            "Content-Type": "application/json",
            "X-Nextcloud-Talk-Random": random,
            "X-Nextcloud-Talk-Signature": sign(self.secret, random, body),
            "X-Nextcloud-Talk-Backend": self.base_url or "http://nextcloud.invalid",
        }

    async def deliver(
        self,
        session: Any,
        body: bytes,
        headers: dict[str, str],
        url: str | None = None,
    ) -> int:
        """POST a webhook with ``session`` (an aiohttp ClientSession or aiohttp TestClient)."""
        async with session.post(url or self.bot_url, data=body, headers=headers) as resp:
            return int(resp.status)

    async def say(self, session: Any, *, room: str, user: str, text: str, url: str | None = None, **kw: Any) -> int:
        body = json.dumps(self.payload(room=room, user=user, text=text, **kw)).encode()
        return await self.deliver(session, body, self.signed_headers(body), url)
