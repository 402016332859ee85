"""WhatsApp adapter on Meta's Cloud API (Graph API) over aiohttp.

* Webhook set-up: ``GET <webhook_path>?hub.mode=subscribe&hub.verify_token=...&hub.challenge=...``
  is answered with the challenge only when the verify token matches (constant time).
* Every event: ``X-Hub-Signature-256`` = ``sha256=`` + HMAC-SHA256(app secret, raw body), checked in
  constant time on the raw bytes (read with a cap) before anything is parsed; a signature seen before
  is a replay (409). Events for another phone number id, delivery statuses and reactions are not turns.
* Identity: the sender's ``wa_id``; every chat is one-to-one (the Cloud API has no groups).
* The 24-hour window: a person can be sent free-form text only within 24 hours of their last message.
  Outside it (a reminder the next day) the configured ``template`` is sent with the text as its body
  parameter, or, without one, the send fails and the outbox tries the person's next channel.
* Media: image, document, audio (voice notes), video and sticker messages become attachments (the
  media id); ``fetch_attachment`` asks the Graph API for the media URL, then downloads it with the
  token, only from Meta's media host. ``send_file`` uploads to ``/<phone_number_id>/media`` and sends it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from adapters.body import BodyTooLarge, read_body
from adapters.download import check_declared, download
from adapters.ratelimit import RateLimiter, with_retry
from adapters.whatsapp_config import WhatsAppConfig
from gateway.adapter import Adapter, AdapterAuthError
from gateway.delivery.stream import deliver_or_hand_over
from gateway.logs import install_redaction
from gateway.media.errors import AttachmentUnavailable
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply
from gateway.util.tasks import EventTasks

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.whatsapp")
WINDOW_S = 24 * 3600
MEDIA_HOSTS = ("lookaside.fbsbx.com",)
_MAX_BODY = 512 * 1024
_MEDIA = {"image": "photo", "document": "document", "audio": "audio", "video": "video", "sticker": "sticker"}
_SENT_KIND = {"image": "image", "audio": "audio", "video": "video"}
_RATE_CODES = {4, 80007, 130429, 131048, 131056}


class GraphError(Exception):
    def __init__(self, status: int, code: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"Graph API {status} (code {code}): {message}")
        self.status, self.code, self.retry_after = status, code, retry_after


class OutsideWindow(Exception):
    """Free-form text outside the 24-hour window and no template configured: not deliverable here."""


def retry_after_seconds(exc: BaseException) -> float | None:
    if isinstance(exc, GraphError) and (exc.status == 429 or exc.code in _RATE_CODES):
        return exc.retry_after if exc.retry_after is not None else 1.0
    return None


def signature_ok(secret: str, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(header.encode("utf-8", "replace"), expected.encode())


class WhatsAppAdapter(Adapter):
    name: ClassVar[str] = "whatsapp"

    def __init__(self, gateway: Services, config: WhatsAppConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("whatsapp", WhatsAppConfig)
        super().__init__(gateway, cfg)
        self.cfg: WhatsAppConfig = cfg
        if cfg.access_token is None or cfg.app_secret is None or cfg.verify_token is None:
            raise ValueError("channels.whatsapp.access_token, app_secret and verify_token are required")
        self.max_message_chars = cfg.max_text_chars  # type: ignore[misc]
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._http: aiohttp.ClientSession | None = None
        self._seen: dict[str, float] = {}  # signature -> when first seen
        self._tasks = EventTasks(log, "whatsapp: handling a message")
        self._limiter = RateLimiter(per_key_rate=cfg.send_rate_per_s, per_key_burst=cfg.send_burst,
                                    global_rate=20, global_burst=20)  # fmt: skip
        self._store = Path(gateway.config.data_dir) / "channels" / "whatsapp" / "window.json"
        self._last_in: dict[str, float] = self._load_window()
        self.stats = {"events": 0, "sent": 0, "templates": 0, "webhook_rejected": 0, "webhook_replayed": 0,
                      "webhook_bad_payload": 0}  # fmt: skip

    def _token(self) -> str:
        return self.cfg.access_token.get_secret_value() if self.cfg.access_token else ""

    # ----------------------------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        self._stop.clear()
        install_redaction([self._token(), self.cfg.app_secret.get_secret_value() if self.cfg.app_secret else ""])
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60, sock_connect=15))
        try:
            try:
                await self._graph("GET", f"/{self.cfg.phone_number_id}", params={"fields": "display_phone_number"})
            except GraphError as exc:
                if exc.status in (401, 403) or exc.code == 190:
                    raise AdapterAuthError(f"whatsapp: the Graph API refused the token ({exc.code})") from None
                raise
            self.mark_connected()
            self.ready.set()
            await self._stop.wait()
        finally:
            self.ready.clear()
            await self._tasks.cancel_all()
            await self._http.close()
            self._http = None

    async def stop(self) -> None:
        self._stop.set()

    def health(self) -> dict[str, Any]:
        return {"phone_number_id": self.cfg.phone_number_id, **self.stats}

    async def _graph(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        http = self._http
        if http is None:
            raise RuntimeError("whatsapp adapter is not connected")
        headers = {"Authorization": f"Bearer {self._token()}"}
        async with http.request(method, self.cfg.graph_base + path, headers=headers, **kwargs) as resp:
            body = await resp.json(content_type=None)
            if resp.status == 200 and isinstance(body, dict):
                return body
            error = body.get("error", {}) if isinstance(body, dict) else {}
            error = error if isinstance(error, dict) else {}
            wait = resp.headers.get("Retry-After")
            raise GraphError(resp.status, int(error.get("code") or 0), str(error.get("message") or ""),
                             float(wait) if wait and wait.isdigit() else None)  # fmt: skip

    # ------------------------------------------------------------------------------------- webhook
    def routes(self) -> list[web.RouteDef]:
        return [web.get(self.cfg.webhook_path, self._verify), web.post(self.cfg.webhook_path, self._webhook)]

    async def _verify(self, request: web.Request) -> web.Response:
        expected = self.cfg.verify_token.get_secret_value() if self.cfg.verify_token else ""
        got = request.query.get("hub.verify_token", "")
        if request.query.get("hub.mode") != "subscribe" or not expected or \
                not hmac.compare_digest(got.encode("utf-8", "replace"), expected.encode()):  # fmt: skip
            self.stats["webhook_rejected"] += 1
            return web.Response(status=403)
        return web.Response(text=request.query.get("hub.challenge", ""))

    async def _webhook(self, request: web.Request) -> web.Response:
        secret = self.cfg.app_secret.get_secret_value() if self.cfg.app_secret else ""
        header = request.headers.get("X-Hub-Signature-256", "")
        if not secret or not header.startswith("sha256="):
            return self._reject(request, "unsigned")
        try:
            body = await read_body(request, _MAX_BODY)
        except (BodyTooLarge, TimeoutError) as exc:
            return self._bad(f"body refused ({exc.__class__.__name__})")
        if not signature_ok(secret, body, header):
            return self._reject(request, "bad signature")
        now = time.monotonic()
        if len(self._seen) > 10_000:
            self._seen = {sig: at for sig, at in self._seen.items() if now - at < WINDOW_S}
        if header in self._seen:
            self.stats["webhook_replayed"] += 1
            log.warning("whatsapp: replayed webhook refused from %s", request.remote)
            return web.Response(status=409)
        self._seen[header] = now
        try:
            data = json.loads(body)
            if not isinstance(data, dict) or data.get("object") != "whatsapp_business_account":
                raise ValueError("not a WhatsApp Business Account event")
            messages = list(self._messages(data))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return self._bad(str(exc))
        self.touch()
        for message in messages:
            self.stats["events"] += 1
            self._last_in[message.account_id] = time.time()
            self._tasks.spawn(self._turn(message))
        if messages:
            await asyncio.to_thread(self._save_window)
        return web.Response(status=200)

    def _reject(self, request: web.Request, why: str) -> web.Response:
        self.stats["webhook_rejected"] += 1
        log.warning("whatsapp: webhook request refused (%s) from %s", why, request.remote)
        return web.Response(status=401)

    def _bad(self, why: str) -> web.Response:
        self.stats["webhook_bad_payload"] += 1
        log.warning("whatsapp: webhook payload refused: %s", why)
        return web.Response(status=400)

    def _messages(self, data: dict[str, Any]) -> list[InboundMessage]:
        out: list[InboundMessage] = []
        for entry in data.get("entry") or ():
            for change in entry.get("changes") or ():
                value = change.get("value") or {}
                if change.get("field") != "messages" or \
                        (value.get("metadata") or {}).get("phone_number_id") != self.cfg.phone_number_id:  # fmt: skip
                    continue
                names = {c.get("wa_id"): (c.get("profile") or {}).get("name", "") for c in value.get("contacts") or ()}
                for item in value.get("messages") or ():
                    message = self.normalize(item, names)
                    if message is not None:
                        out.append(message)
        return out

    def normalize(self, item: dict[str, Any], names: dict[str, str]) -> InboundMessage | None:
        sender, wamid, kind = item.get("from"), item.get("id"), item.get("type")
        if not isinstance(sender, str) or not isinstance(wamid, str) or not sender or not wamid:
            raise ValueError("message without sender or id")
        text, attachments = "", ()
        if kind == "text":
            text = (item.get("text") or {}).get("body", "")
        elif kind in _MEDIA:
            media = item.get(kind) or {}
            text = media.get("caption") or ""
            attachments = (Attachment(
                kind="voice" if kind == "audio" and media.get("voice") else _MEDIA[kind],
                name=str(media.get("filename") or "")[:255], mime_type=str(media.get("mime_type") or ""),
                platform_id=str(media.get("id") or "")),)  # fmt: skip
        else:
            return None  # reactions, locations, contacts, interactive replies: not turns (yet)
        if not isinstance(text, str):
            raise ValueError("text is not a string")
        ts = item.get("timestamp")
        context = item.get("context") or {}
        return InboundMessage(
            channel=self.name, account_id=sender, conversation_id=sender, kind=ConversationKind.DM,
            display_name=str(names.get(sender) or ""), text=text, message_id=wamid, mentioned=True,
            timestamp=datetime.fromtimestamp(int(ts), UTC) if isinstance(ts, str) and ts.isdigit() else None,
            attachments=attachments, reply_to=str(context.get("id") or ""), raw={"wamid": wamid},
        )  # fmt: skip

    async def _turn(self, message: InboundMessage) -> None:
        reply = await self.gateway.handle_inbound(message)
        if reply is None:
            return

        async def deliver(reply: Reply) -> None:
            await self._deliver(message.account_id, self.reply_chunks(reply), context=message.message_id)

        await deliver_or_hand_over(reply, deliver)


    # --------------------------------------------------------------------------------- the window
    def in_window(self, wa_id: str) -> bool:
        return time.time() - self._last_in.get(wa_id, 0.0) < WINDOW_S

    def _load_window(self) -> dict[str, float]:
        try:
            saved = json.loads(self._store.read_text())
        except (OSError, ValueError):
            return {}
        return {k: float(v) for k, v in saved.items() if isinstance(v, int | float)} if isinstance(saved, dict) else {}

    def _save_window(self) -> None:
        cutoff = time.time() - WINDOW_S
        self._store.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._store.with_suffix(".tmp")
        tmp.write_text(json.dumps({k: v for k, v in self._last_in.items() if v >= cutoff}))
        os.replace(tmp, self._store)

    # --------------------------------------------------------------------------------------- media
    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        what = f"the {attachment.kind} {attachment.name!r}" if attachment.name else f"the {attachment.kind}"
        try:
            info = await self._graph("GET", f"/{attachment.platform_id}")
        except (GraphError, aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
            raise AttachmentUnavailable(f"WhatsApp could not hand over {what} ({exc.__class__.__name__})") from None
        size = info.get("file_size")
        check_declared(size if isinstance(size, int) else 0, max_bytes, what)
        url = str(info.get("url") or "")
        parts, graph = urlsplit(url), urlsplit(self.cfg.graph_base)
        # The token goes only to Meta's media host (or the configured Graph API's own origin, in tests).
        if not (parts.scheme == "https" and parts.hostname in MEDIA_HOSTS) and \
                (parts.scheme, parts.netloc) != (graph.scheme, graph.netloc):  # fmt: skip
            raise AttachmentUnavailable(f"{what} is not on WhatsApp's media host")
        assert self._http is not None
        return await download(self._http, url, max_bytes=max_bytes, what=what,
                              headers={"Authorization": f"Bearer {self._token()}"})  # fmt: skip

    async def send_file(self, address: ConversationAddress, *, name: str, mime_type: str, data: bytes) -> str:
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime_type)
        form.add_field("file", data, filename=name, content_type=mime_type)
        try:
            media = await self._graph("POST", f"/{self.cfg.phone_number_id}/media", data=form)
            kind = _SENT_KIND.get(mime_type.split("/", 1)[0], "document")
            body: dict[str, Any] = {"id": media["id"]}
            if kind == "document":
                body["filename"] = name
            sent = await self._send_payload(address.conversation_id, {"type": kind, kind: body})
        except (GraphError, KeyError) as exc:
            raise AttachmentUnavailable(f"WhatsApp refused {name!r} ({exc})") from None
        return sent

    # ------------------------------------------------------------------------------------ outbound
    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        await self._deliver(address.conversation_id, self.reply_chunks(reply))

    async def _deliver(self, wa_id: str, chunks: list[str], *, context: str = "") -> None:
        if not self.in_window(wa_id):
            if not self.cfg.template:
                raise OutsideWindow(f"whatsapp: {wa_id[-4:]} wrote more than 24 hours ago and no template is set")
            text = "\n\n".join(chunks)
            await self._send_payload(wa_id, {"type": "template", "template": {
                "name": self.cfg.template, "language": {"code": self.cfg.template_language},
                "components": [{"type": "body", "parameters": [{"type": "text", "text": text[:1024]}]}]}})
            self.stats["templates"] += 1
            return
        for i, chunk in enumerate(chunks):
            payload: dict[str, Any] = {"type": "text", "text": {"body": chunk, "preview_url": False}}
            if context and i == 0:
                payload["context"] = {"message_id": context}
            await self._send_payload(wa_id, payload)

    async def _send_payload(self, wa_id: str, payload: dict[str, Any]) -> str:
        await self._limiter.acquire(wa_id)
        body = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": wa_id, **payload}
        answer = await with_retry(lambda: self._graph("POST", f"/{self.cfg.phone_number_id}/messages", json=body),
                                  retry_after=retry_after_seconds, what="whatsapp send")  # fmt: skip
        self.stats["sent"] += 1
        messages = answer.get("messages") or [{}]
        return str(messages[0].get("id") or "")
