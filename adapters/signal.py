"""Signal adapter on the ``signal-cli`` daemon's HTTP interface (JSON-RPC 2.0 + Server-Sent Events).

There is no maintained Python library for it, so this is the documented wire protocol over aiohttp:

* In: ``GET /api/v1/events`` is an SSE stream; every ``receive`` event carries an ``envelope``. Each
  line of the stream (events and keep-alive comments) is activity for the watchdog; a stream that
  ends or fails goes to the supervisor and its backoff. Only ``dataMessage`` envelopes are turns
  (receipts, typing and sync messages from the bot's other devices are not).
* Out: ``POST /api/v1/rpc`` with ``send`` (``recipient`` or ``groupId``, ``message``; in groups the
  answer quotes the question), files as data URIs in ``attachments``.
* Identity: the sender's ACI (``sourceUuid``) when the daemon gives it, else their number; a DM is one
  conversation per person, a group is ``group:<groupId>``. Mentions: a mention of the bot's number, a
  quote of one of its messages, or ``@<bot_name>`` in the text.
* Files: a message's ``attachments`` become attachments (``platform_id`` the attachment id, ``url`` the
  conversation it came in); ``fetch_attachment`` asks ``getAttachment`` (base64), refusing what is
  declared over the cap before asking. ``send_file`` sends a data URI.

The daemon's HTTP interface has no authentication, so nothing arrives at kith's own server: there is
no webhook to forge, and the config check keeps the daemon on this machine.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

import aiohttp

from adapters.download import check_declared
from adapters.ratelimit import RateLimiter
from adapters.signal_config import SignalConfig
from gateway.adapter import Adapter
from gateway.delivery.stream import deliver_or_hand_over
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply
from gateway.util.tasks import EventTasks

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.signal")
GROUP = "group:"
_KINDS = {"image": "photo", "audio": "audio", "video": "video"}


class SignalRpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"signal-cli error {code}: {message}")
        self.code = code


class SignalAdapter(Adapter):
    name: ClassVar[str] = "signal"

    def __init__(self, gateway: Services, config: SignalConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("signal", SignalConfig)
        super().__init__(gateway, cfg)
        self.cfg: SignalConfig = cfg
        self.max_message_chars = cfg.max_text_chars  # type: ignore[misc]  # per instance, from config
        self.stall_after_s = cfg.stall_after_s  # type: ignore[misc]
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._http: aiohttp.ClientSession | None = None
        self._ids = itertools.count(1)
        self._tasks = EventTasks(log, "signal: handling a message")
        self._limiter = RateLimiter(per_key_rate=cfg.send_rate_per_s, per_key_burst=cfg.send_burst,
                                    global_rate=5, global_burst=10)  # fmt: skip
        self._ours: set[int] = set()  # timestamps of our messages: a quote of one addresses the bot
        self.stats = {"events": 0, "sent": 0, "refused": 0}

    # ----------------------------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        self._stop.clear()
        http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        self._http = http
        try:
            async with http.get(self.cfg.daemon_url + "/api/v1/events",
                                headers={"Accept": "text/event-stream"}) as resp:  # fmt: skip
                if resp.status != 200:
                    raise ConnectionError(f"signal-cli events answered HTTP {resp.status}")
                self.mark_connected()
                self.ready.set()
                reader = asyncio.ensure_future(self._read(resp))
                stopped = asyncio.ensure_future(self._stop.wait())
                try:
                    await asyncio.wait({reader, stopped}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopped.cancel()
                    reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader
                if reader.done() and not reader.cancelled() and reader.exception() is not None:
                    raise reader.exception()  # type: ignore[misc]
                if not self._stop.is_set():
                    raise ConnectionError("signal-cli closed the event stream")
        finally:
            self.ready.clear()
            await self._tasks.cancel_all()
            await http.close()
            self._http = None

    async def _read(self, resp: aiohttp.ClientResponse) -> None:
        kind, data = "", []
        async for raw in resp.content:
            self.touch()
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith(":"):
                continue  # a keep-alive comment
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif not line:
                if data and kind in ("", "receive"):
                    self._event("\n".join(data))
                kind, data = "", []

    async def stop(self) -> None:
        self._stop.set()

    def health(self) -> dict[str, Any]:
        return {"account": self.cfg.account, **self.stats}

    # ------------------------------------------------------------------------------------- inbound
    def _event(self, text: str) -> None:
        try:
            payload = json.loads(text)
            envelope = payload.get("envelope") if isinstance(payload, dict) else None
            if not isinstance(envelope, dict):
                raise ValueError("no envelope")
            message = self.normalize(envelope)
        except (ValueError, TypeError, KeyError) as exc:
            self.stats["refused"] += 1
            log.warning("signal: event refused: %s", exc)
            return
        if message is not None:
            self.stats["events"] += 1
            self._tasks.spawn(self._turn(message))

    def normalize(self, envelope: dict[str, Any]) -> InboundMessage | None:
        data = envelope.get("dataMessage")
        if not isinstance(data, dict):
            return None  # receipts, typing, sync messages of the bot's other devices
        sender = envelope.get("sourceUuid") or envelope.get("sourceNumber") or envelope.get("source")
        number = envelope.get("sourceNumber") or ""
        if not isinstance(sender, str) or not sender or sender == self.cfg.account or number == self.cfg.account:
            return None
        ts = envelope.get("timestamp")
        if not isinstance(ts, int):
            raise ValueError("envelope without a timestamp")
        text = data.get("message") or ""
        if not isinstance(text, str):
            raise ValueError("message is not a string")
        if len(text) > self.max_message_chars * 4:
            raise ValueError(f"text of {len(text)} characters is over the limit")
        group = data.get("groupInfo")
        group_id = group.get("groupId") if isinstance(group, dict) else None
        conversation = f"{GROUP}{group_id}" if group_id else sender
        attachments = tuple(_attachment(a, conversation) for a in data.get("attachments") or () if isinstance(a, dict))
        if not text and not attachments:
            return None
        quote = data.get("quote") if isinstance(data.get("quote"), dict) else {}
        return InboundMessage(
            channel=self.name, account_id=sender, display_name=str(envelope.get("sourceName") or ""),
            conversation_id=conversation,
            kind=ConversationKind.GROUP if group_id else ConversationKind.DM,
            text=text.replace("\ufffc", f"@{self.cfg.bot_name}" if self._mentions_bot(data) else "@"),
            message_id=f"{sender}:{ts}", timestamp=datetime.fromtimestamp(ts / 1000, UTC),
            attachments=attachments, reply_to=str(quote.get("id") or ""),
            mentioned=not group_id or self._addressed(data, text, quote),
            raw={"timestamp": ts, "author": sender, "number": number},
        )  # fmt: skip

    def _mentions_bot(self, data: dict[str, Any]) -> bool:
        mentions = data.get("mentions")
        return isinstance(mentions, list) and any(
            isinstance(m, dict) and self.cfg.account and m.get("number") == self.cfg.account for m in mentions)

    def _addressed(self, data: dict[str, Any], text: str, quote: dict[str, Any]) -> bool:
        if self._mentions_bot(data):
            return True
        if quote.get("id") in self._ours or (self.cfg.account and quote.get("authorNumber") == self.cfg.account):
            return True
        return f"@{self.cfg.bot_name}".lower() in text.lower()

    async def _turn(self, message: InboundMessage) -> None:
        reply = await self.gateway.handle_inbound(message)
        if reply is None:
            return
        quote = None
        if message.kind is ConversationKind.GROUP:
            quote = (int(message.raw["timestamp"]), str(message.raw.get("number") or message.raw["author"]))

        async def deliver(reply: Reply) -> None:
            await self._deliver(message.conversation_id, self.reply_chunks(reply), quote=quote)

        await deliver_or_hand_over(reply, deliver)


    # ------------------------------------------------------------------------------------ JSON-RPC
    async def rpc(self, method: str, params: dict[str, Any]) -> Any:
        http = self._http
        if http is None:
            raise RuntimeError("signal adapter is not connected")
        if self.cfg.account:
            params = {"account": self.cfg.account, **params}
        body = {"jsonrpc": "2.0", "method": method, "params": params, "id": str(next(self._ids))}
        async with http.post(self.cfg.daemon_url + "/api/v1/rpc", json=body,
                             timeout=aiohttp.ClientTimeout(total=60)) as resp:  # fmt: skip
            answer = await resp.json(content_type=None)
        if not isinstance(answer, dict):
            raise SignalRpcError(-32700, "answer is not an object")
        error = answer.get("error")
        if isinstance(error, dict):
            raise SignalRpcError(int(error.get("code") or 0), str(error.get("message") or ""))
        return answer.get("result")

    @staticmethod
    def _target(conversation_id: str, *, many: bool = True) -> dict[str, Any]:
        """``send`` takes a list of recipients, ``getAttachment`` one."""
        if conversation_id.startswith(GROUP):
            return {"groupId": conversation_id[len(GROUP):]}
        return {"recipient": [conversation_id] if many else conversation_id}

    # --------------------------------------------------------------------------------------- media
    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        what = f"the {attachment.kind} {attachment.name!r}" if attachment.name else f"the {attachment.kind}"
        check_declared(attachment.size, max_bytes, what)
        conversation = attachment.url  # where it was sent: getAttachment needs the sender or the group
        try:
            target = self._target(conversation, many=False)
            result = await self.rpc("getAttachment", {"id": attachment.platform_id, **target})
            data = base64.b64decode(str(result.get("data") if isinstance(result, dict) else ""), validate=True)
        except (SignalRpcError, aiohttp.ClientError, TimeoutError, binascii.Error, RuntimeError) as exc:
            raise AttachmentUnavailable(f"signal-cli could not hand over {what} ({exc.__class__.__name__})") from None
        if len(data) > max_bytes:
            raise TooLarge(f"{what} is over the limit")
        return data

    async def send_file(self, address: ConversationAddress, *, name: str, mime_type: str, data: bytes) -> str:
        uri = f"data:{mime_type};filename={name};base64,{base64.b64encode(data).decode()}"
        try:
            result = await self.rpc("send", {**self._target(address.conversation_id), "message": "",
                                             "attachments": [uri]})  # fmt: skip
        except SignalRpcError as exc:
            raise AttachmentUnavailable(f"signal-cli refused {name!r} ({exc.code})") from None
        return str(result.get("timestamp") if isinstance(result, dict) else "")

    # ------------------------------------------------------------------------------------ outbound
    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        await self._deliver(address.conversation_id, self.reply_chunks(reply))

    async def _deliver(self, conversation_id: str, chunks: list[str], *, quote: tuple[int, str] | None = None) -> None:
        for i, chunk in enumerate(chunks):
            await self._limiter.acquire(conversation_id)
            params: dict[str, Any] = {**self._target(conversation_id), "message": chunk}
            if quote is not None and i == 0:
                params |= {"quoteTimestamp": quote[0], "quoteAuthor": quote[1]}
            result = await self.rpc("send", params)
            if isinstance(result, dict) and isinstance(result.get("timestamp"), int):
                self._ours.add(result["timestamp"])
                if len(self._ours) > 1000:
                    self._ours.pop()
            self.stats["sent"] += 1


def _attachment(item: dict[str, Any], conversation: str) -> Attachment:
    """``url`` is the conversation it came in: ``getAttachment`` names the sender or group with the id."""
    mime = str(item.get("contentType") or "")
    kind = _KINDS.get(mime.split("/", 1)[0], "document")
    if item.get("voiceNote") is True:
        kind = "voice"
    size = item.get("size")
    return Attachment(kind=kind, name=str(item.get("filename") or item.get("id") or "")[:255], mime_type=mime,
                      size=size if isinstance(size, int) and size >= 0 else 0, platform_id=str(item.get("id") or ""),
                      url=conversation)  # fmt: skip
