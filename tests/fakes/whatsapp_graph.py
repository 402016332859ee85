"""A local WhatsApp Cloud API: the Graph API's endpoints a business number uses, and webhooks signed as
Meta signs them (``X-Hub-Signature-256`` = ``sha256=`` + HMAC-SHA256(app secret, body)).

Graph: ``GET /v21.0/<phone_number_id>``, ``POST /v21.0/<phone_number_id>/messages`` (text, template,
media by id), ``POST /v21.0/<phone_number_id>/media`` (multipart upload), ``GET /v21.0/<media_id>``
(the media URL, which this server serves to the bearer token only). Errors have Graph's shape
(``{"error": {"message", "type", "code"}}``; 401 code 190 for a bad token, 429 code 130429 throttled).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.serve import FakeServer, arrived

PHONE_ID = "106540352242922"
WABA = "102290129340398"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class FakeGraph(FakeServer):
    token: str
    phone_number_id: str = PHONE_ID
    throttle_next: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    uploads: list[dict[str, Any]] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def graph_base(self) -> str:
        return self.base_url + "/v21.0"

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v21.0/{node}", self._node)
        router.add_post("/v21.0/{phone}/messages", self._messages)
        router.add_post("/v21.0/{phone}/media", self._upload)
        router.add_get("/media-bytes/{media_id}", self._download)

    # ----------------------------------------------------------------------------- test helpers
    def add_media(self, data: bytes, mime_type: str) -> str:
        media_id = str(900000 + next(self._ids))
        self.media[media_id] = (data, mime_type)
        return media_id

    def event(self, *messages: dict[str, Any], phone_number_id: str | None = None,
              name: str = "Ada") -> dict[str, Any]:  # fmt: skip
        """A webhook body carrying ``messages`` (see ``text``/``image``)."""
        contacts = [{"profile": {"name": name}, "wa_id": m["from"]} for m in messages]
        metadata = {"display_phone_number": "15550001111", "phone_number_id": phone_number_id or self.phone_number_id}
        value = {"messaging_product": "whatsapp", "metadata": metadata, "contacts": contacts,
                 "messages": list(messages)}
        return {"object": "whatsapp_business_account",
                "entry": [{"id": WABA, "changes": [{"field": "messages", "value": value}]}]}

    def text(self, sender: str, body: str, **extra: Any) -> dict[str, Any]:
        return {"from": sender, "id": f"wamid.HBg{next(self._ids):08d}", "timestamp": str(int(time.time())),
                "type": "text", "text": {"body": body}, **extra}

    def image(self, sender: str, media_id: str, *, caption: str = "", mime_type: str = "image/jpeg") -> dict[str, Any]:
        return {"from": sender, "id": f"wamid.HBg{next(self._ids):08d}", "timestamp": str(int(time.time())),
                "type": "image", "image": {"id": media_id, "mime_type": mime_type, "sha256": "x", "caption": caption}}

    async def post(self, http: aiohttp.ClientSession, url: str, body: bytes, *, secret: str,
                   signature: str | None = None) -> int:  # fmt: skip
        headers = {"Content-Type": "application/json",
                   "X-Hub-Signature-256": signature if signature is not None else sign(secret, body)}
        async with http.post(url, data=body, headers=headers) as resp:
            await resp.read()
            return resp.status

    async def wait_sent(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        return await arrived(self.sent, count, "messages sent", timeout)

    # ---------------------------------------------------------------------------------- protocol
    def _auth(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(401, 190, "Invalid OAuth access token - Cannot parse access token", "OAuthException")
        return None

    async def _node(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        node = request.match_info["node"]
        if node == self.phone_number_id:
            return web.json_response({"display_phone_number": "+1 555-000-1111", "verified_name": "kith test",
                                      "id": node})
        if node in self.media:
            data, mime = self.media[node]
            return web.json_response({"url": f"{self.base_url}/media-bytes/{node}", "mime_type": mime,
                                      "sha256": hashlib.sha256(data).hexdigest(), "file_size": len(data), "id": node,
                                      "messaging_product": "whatsapp"})  # fmt: skip
        return _error(400, 100, "Unsupported get request.", "GraphMethodException")

    async def _messages(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        if request.match_info["phone"] != self.phone_number_id:
            return _error(400, 100, "Invalid parameter", "OAuthException")
        body = await request.json()
        if self.throttle_next > 0:
            self.throttle_next -= 1
            return _error(429, 130429, "Rate limit hit", "OAuthException")
        if body.get("messaging_product") != "whatsapp" or not body.get("to"):
            return _error(400, 100, "Invalid parameter", "OAuthException")
        self.sent.append(body)
        return web.json_response({"messaging_product": "whatsapp", "contacts": [{"input": body["to"],
                                  "wa_id": body["to"]}], "messages": [{"id": f"wamid.OUT{next(self._ids):06d}"}]})

    async def _upload(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        form = await request.post()
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not isinstance(upload, web.FileField):
            return _error(400, 100, "Invalid parameter", "OAuthException")
        data = upload.file.read()
        media_id = self.add_media(data, str(form.get("type")))
        self.uploads.append({"id": media_id, "filename": upload.filename, "data": data, "type": form.get("type")})
        return web.json_response({"id": media_id})

    async def _download(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        item = self.media.get(request.match_info["media_id"])
        if item is None:
            return web.Response(status=404)
        self.downloads.append(request.match_info["media_id"])
        return web.Response(body=item[0], content_type=item[1])


def _error(status: int, code: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": code, "fbtrace_id": "AbCd"}},
                             status=status)
