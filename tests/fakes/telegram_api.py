"""A local Telegram Bot API server speaking the real HTTP protocol to python-telegram-bot.

``/bot<token>/<method>`` with form or JSON parameters, answers ``{"ok": true, "result": ...}`` or the
error shape PTB maps to exceptions (401 -> InvalidToken, 429 + ``parameters.retry_after`` ->
RetryAfter). Switches for tests: ``stalled`` (getUpdates never answers), ``revoke()`` (every call
401s from now on), ``throttle_next`` (next sendMessage calls answer 429), ``throttle`` (method name ->
how many of its next calls answer 429), ``refuse`` (method name -> how many of its next calls answer
400 "message can't be edited", as Telegram does for a message it will no longer change).

Buttons: ``reply_markup`` is kept with each sent message (``Sent.buttons()``), ``make_callback`` builds
the update of a press, ``answerCallbackQuery`` and ``editMessageReplyMarkup`` are recorded.

Streaming: ``editMessageText`` (400 "message is not modified" for the same text, as Telegram answers),
``sendMessageDraft`` (private chats only) and ``deleteMessage``; ``timeline`` records every send,
edit, draft and delete with the time it arrived, ``chat_messages`` what each message shows now.

Files: ``add_file`` stores bytes under a new file_id; ``getFile`` answers its ``file_path`` (or 400
"file is too big" past the Bot API's 20 MB, as Telegram does) and ``GET /file/bot<token>/<path>``
serves the bytes. ``photo``/``document``/``voice`` build the message fields Telegram sends.
``sendVoice`` (multipart upload) keeps each voice note sent in ``voices``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.serve import FakeServer, arrived

BOT_ID = 7000001
DOWNLOAD_LIMIT = 20 * 1024 * 1024
BOT_USERNAME = "kith_test_bot"


@dataclass
class Sent:
    chat_id: int
    text: str
    parse_mode: str | None
    reply_to: int | None
    reply_markup: dict[str, Any] | None = None
    message_id: int = 0

    def buttons(self) -> dict[str, str]:
        """label -> callback_data of an inline keyboard."""
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return {b["text"]: b["callback_data"] for row in rows for b in row}


@dataclass
class Event:
    at: float  # time.monotonic() when the call arrived
    method: str  # sendMessage, editMessageText, sendMessageDraft, deleteMessage, or "429 <method>"
    chat_id: int
    message_id: int  # the draft id for sendMessageDraft
    text: str


@dataclass
class SentVoice:
    chat_id: int
    data: bytes
    filename: str
    duration: int | None
    reply_to: int | None
    caption: str = ""
    message_id: int = 0


@dataclass
class StoredFile:
    data: bytes
    path: str
    unique_id: str
    declared_size: int  # what getFile and the message say; a test may make it lie
    chunked: bool = False  # served without Content-Length (the body is the only measure)


@dataclass
class FakeTelegram(FakeServer):
    token: str
    stalled: bool = False
    revoked: bool = False
    throttle_next: int = 0
    retry_after: int = 1
    throttle: dict[str, int] = field(default_factory=dict)
    refuse: dict[str, int] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    timeline: list[Event] = field(default_factory=list)
    chat_messages: dict[tuple[int, int], str] = field(default_factory=dict)
    not_modified: int = 0  # edits that changed nothing (Telegram refuses them)
    answered: list[dict[str, Any]] = field(default_factory=list)  # answerCallbackQuery calls
    markup_removed: list[tuple[int, int]] = field(default_factory=list)  # (chat, message) keyboards taken away
    _callback_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(9001))
    actions: list[tuple[int, str]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    webhook: dict[str, Any] = field(default_factory=dict)
    commands: list[dict[str, Any]] = field(default_factory=list)
    get_updates_answered: int = 0
    files: dict[str, StoredFile] = field(default_factory=dict)
    downloads: list[str] = field(default_factory=list)  # file paths fetched through /file/bot<token>/
    voices: list[SentVoice] = field(default_factory=list)  # sendVoice uploads
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _update_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _message_ids: dict[int, itertools.count[int]] = field(default_factory=dict)
    _changed: asyncio.Condition | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> str:
        self._changed = asyncio.Condition()
        return await super().start()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/bot{token}/{method}", self._dispatch)
        router.add_get("/file/bot{token}/{path:.+}", self._download)

    async def close(self) -> None:
        self._closing.set()
        await super().close()

    def revoke(self) -> None:
        self.revoked = True

    # -------------------------------------------------------------------------------- protocol
    @staticmethod
    def _ok(result: Any) -> web.Response:
        return web.json_response({"ok": True, "result": result})

    @staticmethod
    def _error(status: int, description: str, **parameters: Any) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if parameters:
            body["parameters"] = parameters
        return web.json_response(body, status=status)

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            data = await request.json()
            return dict(data) if isinstance(data, dict) else {}
        form = await request.post()
        out: dict[str, Any] = {}
        for key, value in form.items():
            if isinstance(value, web.FileField):  # an upload (sendVoice): its bytes, read now
                out[key] = (value.filename, value.file.read())
                continue
            if not isinstance(value, str):
                continue
            # PTB JSON-encodes non-string values inside the form; plain strings stay as they are.
            try:
                out[key] = json.loads(value)
            except ValueError:
                out[key] = value
        return out

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        self.calls.append(method)
        if self.revoked or request.match_info["token"] != self.token:
            return self._error(401, "Unauthorized")
        params = await self._params(request)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return self._error(404, "Not Found: method not found")
        return await handler(params)  # type: ignore[no-any-return]

    async def _m_getMe(self, _: dict[str, Any]) -> web.Response:
        return self._ok(
            {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Kith",
                "username": BOT_USERNAME,
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        )

    async def _m_deleteWebhook(self, _: dict[str, Any]) -> web.Response:
        self.webhook = {}
        return self._ok(True)

    async def _m_setWebhook(self, params: dict[str, Any]) -> web.Response:
        self.webhook = params
        return self._ok(True)

    async def _m_setMyCommands(self, params: dict[str, Any]) -> web.Response:
        self.commands = list(params.get("commands") or [])
        return self._ok(True)

    async def _m_getWebhookInfo(self, _: dict[str, Any]) -> web.Response:
        return self._ok({"url": self.webhook.get("url", ""), "has_custom_certificate": False,
                         "pending_update_count": len(self._updates)})

    async def _m_getUpdates(self, params: dict[str, Any]) -> web.Response:
        assert self._changed is not None
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        await self._hang_while_stalled()  # the client gives up first; the connection just hangs
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        deadline = time.monotonic() + timeout
        async with self._changed:
            while not self._updates and not self.stalled:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    break
        await self._hang_while_stalled()
        self.get_updates_answered += 1
        return self._ok(list(self._updates[:100]))

    async def _hang_while_stalled(self) -> None:
        # A request that arrived while stalled never gets an answer, even after un-stalling, like a
        # dead TCP connection; only close() releases it (so the server shuts down promptly).
        if self.stalled:
            await self._closing.wait()

    async def _m_sendChatAction(self, params: dict[str, Any]) -> web.Response:
        self.actions.append((int(params["chat_id"]), str(params.get("action"))))
        return self._ok(True)

    def _throttled(self, method: str, params: dict[str, Any]) -> web.Response | None:
        if self.throttle.get(method, 0) <= 0:
            return None
        self.throttle[method] -= 1
        self.timeline.append(Event(time.monotonic(), f"429 {method}", int(params.get("chat_id") or 0),
                                   int(params.get("message_id") or params.get("draft_id") or 0), ""))
        return self._error(429, f"Too Many Requests: retry after {self.retry_after}", retry_after=self.retry_after)

    def _refused(self, method: str, params: dict[str, Any]) -> web.Response | None:
        if self.refuse.get(method, 0) <= 0:
            return None
        self.refuse[method] -= 1
        self.timeline.append(Event(time.monotonic(), f"400 {method}", int(params.get("chat_id") or 0),
                                   int(params.get("message_id") or 0), ""))
        return self._error(400, "Bad Request: message can't be edited")

    async def _m_sendMessage(self, params: dict[str, Any]) -> web.Response:
        if self.throttle_next > 0:
            self.throttle_next -= 1
            return self._error(429, f"Too Many Requests: retry after {self.retry_after}",
                               retry_after=self.retry_after)
        if (refused := self._throttled("sendMessage", params)) is not None:
            return refused
        chat_id, text = int(params["chat_id"]), str(params["text"])
        if not 1 <= len(text) <= 4096:
            return self._error(400, "Bad Request: message is too long")
        reply = params.get("reply_parameters") or {}
        mid = next(self._message_ids.setdefault(chat_id, itertools.count(1)))
        self.sent.append(Sent(chat_id, text, params.get("parse_mode"), reply.get("message_id"),
                              params.get("reply_markup"), mid))
        self.chat_messages[(chat_id, mid)] = text
        self.timeline.append(Event(time.monotonic(), "sendMessage", chat_id, mid, text))
        chat = {"id": chat_id, "type": "private" if chat_id > 0 else "group", "title": "g"}
        return self._ok({"message_id": mid, "date": int(time.time()), "chat": chat, "text": text,
                         "from": {"id": BOT_ID, "is_bot": True, "first_name": "Kith", "username": BOT_USERNAME}})

    async def _m_sendVoice(self, params: dict[str, Any]) -> web.Response:
        if (refused := self._throttled("sendVoice", params)) is not None:
            return refused
        upload = params.get("voice")
        if not isinstance(upload, tuple):
            return self._error(400, "Bad Request: there is no voice in the request")
        filename, data = upload
        chat_id = int(params["chat_id"])
        mid = next(self._message_ids.setdefault(chat_id, itertools.count(1)))
        duration = params.get("duration")
        self.voices.append(SentVoice(chat_id, data, filename, int(duration) if duration is not None else None,
                                     (params.get("reply_parameters") or {}).get("message_id"),
                                     str(params.get("caption") or ""), mid))
        self.timeline.append(Event(time.monotonic(), "sendVoice", chat_id, mid, ""))
        chat = {"id": chat_id, "type": "private" if chat_id > 0 else "group", "title": "g"}
        voice = {"file_id": f"AwAC{mid:08d}", "file_unique_id": f"AgAD{mid:06d}", "duration": int(duration or 0),
                 "mime_type": "audio/ogg", "file_size": len(data)}
        return self._ok({"message_id": mid, "date": int(time.time()), "chat": chat, "voice": voice,
                         "from": {"id": BOT_ID, "is_bot": True, "first_name": "Kith", "username": BOT_USERNAME}})

    async def _m_editMessageText(self, params: dict[str, Any]) -> web.Response:
        if (refused := self._throttled("editMessageText", params) or self._refused("editMessageText", params)):
            return refused
        chat_id, mid, text = int(params["chat_id"]), int(params["message_id"]), str(params["text"])
        if (chat_id, mid) not in self.chat_messages:
            return self._error(400, "Bad Request: message to edit not found")
        if not 1 <= len(text) <= 4096:
            return self._error(400, "Bad Request: MESSAGE_TOO_LONG")
        if self.chat_messages[(chat_id, mid)] == text:
            self.not_modified += 1
            return self._error(400, "Bad Request: message is not modified: specified new message content and "
                                    "reply markup are exactly the same as a current content and reply markup "
                                    "of the message")
        self.chat_messages[(chat_id, mid)] = text
        self.timeline.append(Event(time.monotonic(), "editMessageText", chat_id, mid, text))
        chat = {"id": chat_id, "type": "private" if chat_id > 0 else "group", "title": "g"}
        return self._ok({"message_id": mid, "date": int(time.time()), "edit_date": int(time.time()), "chat": chat,
                         "text": text, "from": {"id": BOT_ID, "is_bot": True, "first_name": "Kith"}})

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> web.Response:
        if (refused := self._throttled("sendMessageDraft", params)) is not None:
            return refused
        chat_id, draft_id, text = int(params["chat_id"]), int(params["draft_id"]), str(params.get("text") or "")
        if chat_id < 0:
            return self._error(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        if not draft_id or len(text) > 4096:
            return self._error(400, "Bad Request: invalid draft")
        self.timeline.append(Event(time.monotonic(), "sendMessageDraft", chat_id, draft_id, text))
        return self._ok(True)

    async def _m_deleteMessage(self, params: dict[str, Any]) -> web.Response:
        chat_id, mid = int(params["chat_id"]), int(params["message_id"])
        if self.chat_messages.pop((chat_id, mid), None) is None:
            return self._error(400, "Bad Request: message to delete not found")
        self.timeline.append(Event(time.monotonic(), "deleteMessage", chat_id, mid, ""))
        return self._ok(True)

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> web.Response:
        self.answered.append(params)
        return self._ok(True)

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> web.Response:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if key not in self.chat_messages:
            return self._error(400, "Bad Request: message to edit not found")
        self.markup_removed.append(key)
        return self._ok(True)

    def make_callback(self, *, user_id: int, message: Sent, data: str, first_name: str = "Ada") -> dict[str, Any]:
        """A ``callback_query`` update: ``user_id`` pressed the button ``data`` under ``message``."""
        chat: dict[str, Any] = {"id": message.chat_id, "type": "private", "first_name": first_name}
        if message.chat_id < 0:
            chat = {"id": message.chat_id, "type": "supergroup", "title": "group"}
        return {"update_id": next(self._update_ids), "callback_query": {
            "id": str(next(self._callback_ids)), "chat_instance": "ci", "data": data,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "message": {"message_id": message.message_id, "date": int(time.time()), "chat": chat,
                        "text": message.text, "from": {"id": BOT_ID, "is_bot": True, "first_name": "Kith"}}}}

    def shown(self, chat_id: int) -> list[str]:
        """What the chat shows now, oldest message first (drafts are not messages)."""
        return [text for (cid, _), text in sorted(self.chat_messages.items()) if cid == chat_id]

    async def _m_getFile(self, params: dict[str, Any]) -> web.Response:
        stored = self.files.get(str(params.get("file_id", "")))
        if stored is None:
            return self._error(400, "Bad Request: invalid file_id")
        if stored.declared_size > DOWNLOAD_LIMIT:
            return self._error(400, "Bad Request: file is too big")
        return self._ok({"file_id": params["file_id"], "file_unique_id": stored.unique_id,
                         "file_size": stored.declared_size, "file_path": stored.path})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if self.revoked or request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        stored = next((f for f in self.files.values() if f.path == path), None)
        if stored is None:
            return web.Response(status=404)
        self.downloads.append(path)
        if not stored.chunked:
            return web.Response(body=stored.data, content_type="application/octet-stream")
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(stored.data), 65536):
            await resp.write(stored.data[i : i + 65536])
        await resp.write_eof()
        return resp

    # ---------------------------------------------------------------------------- test drivers
    def add_file(self, data: bytes, *, folder: str = "documents", ext: str = ".bin",
                 declared_size: int | None = None, chunked: bool = False) -> dict[str, Any]:
        """Store ``data``; the fields every Bot API file object has (file_id, file_unique_id, file_size)."""
        n = len(self.files) + 1
        file_id = f"AgAC{hashlib.sha256(data + str(n).encode()).hexdigest()[:24]}"
        unique = f"AQAD{n:06d}"
        size = len(data) if declared_size is None else declared_size
        self.files[file_id] = StoredFile(data, f"{folder}/file_{n}{ext}", unique, size, chunked)
        return {"file_id": file_id, "file_unique_id": unique, "file_size": size}

    def photo(self, data: bytes, *, width: int = 1280, height: int = 960, **kw: Any) -> list[dict[str, Any]]:
        """A ``photo`` field: the thumbnails Telegram makes plus the original, smallest first."""
        thumb = self.add_file(data[: max(1, len(data) // 8)], folder="photos", ext=".jpg")
        middle = self.add_file(data[: max(1, len(data) // 2)], folder="photos", ext=".jpg")
        best = self.add_file(data, folder="photos", ext=".jpg", **kw)
        return [{**thumb, "width": max(1, width // 4), "height": max(1, height // 4)},
                {**middle, "width": max(1, width // 2), "height": max(1, height // 2)},
                {**best, "width": width, "height": height}]

    def document(self, data: bytes, *, name: str, mime_type: str, **kw: Any) -> dict[str, Any]:
        ext = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        return {**self.add_file(data, folder="documents", ext=ext, **kw), "file_name": name, "mime_type": mime_type}

    def voice(self, data: bytes, *, duration: int = 3, **kw: Any) -> dict[str, Any]:
        return {**self.add_file(data, folder="voice", ext=".oga", **kw), "duration": duration,
                "mime_type": "audio/ogg"}

    def make_update(
        self,
        *,
        user_id: int,
        text: str | None = None,
        chat_id: int | None = None,
        first_name: str = "Ada",
        group_title: str = "",
        **message: Any,
    ) -> dict[str, Any]:
        chat_id = chat_id if chat_id is not None else user_id
        chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": first_name}
        if chat_id < 0:
            chat = {"id": chat_id, "type": "supergroup", "title": group_title or "group"}
        msg: dict[str, Any] = {
            "message_id": next(self._message_ids.setdefault(chat_id, itertools.count(1))),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
        }
        if text is not None:
            msg["text"] = text
        msg.update(message)
        return {"update_id": next(self._update_ids), "message": msg}

    async def push(self, *updates: dict[str, Any]) -> None:
        assert self._changed is not None
        async with self._changed:
            self._updates.extend(updates)
            self._updates.sort(key=lambda u: u["update_id"])
            self._changed.notify_all()

    async def wait_sent(self, count: int, timeout: float = 30.0) -> list[Sent]:
        return await arrived(self.sent, count, "messages sent", timeout)

    async def wait_voices(self, count: int, timeout: float = 30.0) -> list[SentVoice]:
        return await arrived(self.voices, count, "voice notes sent", timeout)
