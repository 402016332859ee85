"""Matrix adapter on mautrix's client-server API layer (``ClientAPI`` over ``HTTPAPI``, aiohttp).

The sync loop is kith's, not mautrix's ``Syncer``: ``run`` long-polls ``/sync`` itself so that every
answer counts as activity for the watchdog, an invalid token stops only this adapter
(``AdapterAuthError``) and any other failure goes to the host's supervisor and its backoff.

* ``next_batch`` is stored after every sync (``<data_dir>/channels/matrix/sync.json``, with the rooms
  known to be DMs), so a restart resumes where it stopped; the very first start syncs once with
  ``timeout=0`` and answers none of the history it returns. An event delivered twice is one turn
  (the host dedupes by event id).
* Rooms: one conversation each. A room is a DM when the invite said ``is_direct``, the account's
  ``m.direct`` lists it, or ``dm_rooms`` does; any other room is a group (allowlist + mention).
  Mentions: a reply to one of the bot's messages, or ``m.mentions.user_ids`` naming the bot, or, from
  clients that send no ``m.mentions``, the bot's user id or display name in the body.
* ``m.replace`` edits: the new content is a turn of its own (``edits: ignore`` drops them).
* Media: ``m.image``/``m.file``/``m.audio``/``m.video`` become attachments whose ``platform_id`` is the
  ``mxc://`` URI; ``fetch_attachment`` downloads through authenticated media (``/_matrix/client/v1/
  media/download``, Matrix 1.11) with a cap. ``send_file`` uploads to the content repository and posts
  the file. Encrypted rooms are not supported: their events are counted and logged, never answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from collections import deque
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import aiohttp
from mautrix.api import HTTPAPI
from mautrix.client import ClientAPI
from mautrix.errors import MatrixInvalidToken, MatrixRequestError, MLimitExceeded
from mautrix.types import EventType

from adapters.download import check_declared, download
from adapters.matrix_config import MatrixConfig, mxc_download_path
from adapters.ratelimit import RateLimiter, with_retry
from gateway.adapter import Adapter, AdapterAuthError
from gateway.delivery.stream import OnDelta, StreamedReply, streamed_turn
from gateway.logs import install_redaction
from gateway.media.errors import AttachmentUnavailable
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply
from gateway.util.tasks import EventTasks, unless_set, while_showing

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.matrix")
T = TypeVar("T")

_KINDS = {"m.image": "photo", "m.file": "document", "m.audio": "audio", "m.video": "video"}
_OURS_KEPT = 1000  # our recent event ids: a reply to one of them addresses the bot
_TYPING_MS = 30_000


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds to wait after a rate-limited send (mautrix does not parse ``retry_after_ms``)."""
    if isinstance(exc, MLimitExceeded) or (isinstance(exc, MatrixRequestError) and exc.http_status == 429):
        return 1.0
    return None


def msgtype_for(mime_type: str) -> str:
    top = mime_type.split("/", 1)[0]
    return {"image": "m.image", "audio": "m.audio", "video": "m.video"}.get(top, "m.file")


class MatrixAdapter(Adapter):
    name: ClassVar[str] = "matrix"

    def __init__(self, gateway: Services, config: MatrixConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("matrix", MatrixConfig)
        super().__init__(gateway, cfg)
        self.cfg: MatrixConfig = cfg
        if cfg.access_token is None or not cfg.homeserver:
            raise ValueError("channels.matrix.homeserver and access_token are required")
        self.max_message_chars = cfg.max_body_chars  # type: ignore[misc]  # per instance, from config
        self.stall_after_s = cfg.stall_after_s  # type: ignore[misc]
        self.ready = asyncio.Event()
        self.user_id = cfg.user_id
        self._stop = asyncio.Event()
        self._api: ClientAPI | None = None
        self._http: aiohttp.ClientSession | None = None
        self._direct: set[str] = set(cfg.dm_rooms)
        self._names: dict[str, str] = {}  # room -> the bot's display name there
        self._ours: deque[str] = deque(maxlen=_OURS_KEPT)
        self._tasks = EventTasks(log, "matrix: handling an event")
        self._limiter = RateLimiter(per_key_rate=cfg.send_rate_per_s, per_key_burst=cfg.send_burst,
                                    global_rate=10, global_burst=20)  # fmt: skip
        self._store = Path(gateway.config.data_dir) / "channels" / "matrix" / "sync.json"
        self.stats = {"syncs": 0, "events": 0, "sent": 0, "joined": 0, "encrypted_ignored": 0, "refused": 0,
                      "streamed": 0}

    # ----------------------------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        self._stop.clear()
        token = self.cfg.access_token.get_secret_value() if self.cfg.access_token else ""
        install_redaction([token])
        read_s = self.cfg.sync_timeout_s + 30  # a long poll that outlives its timeout by this much is dead
        http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=read_s))
        api = ClientAPI(api=HTTPAPI(base_url=self.cfg.homeserver, token=token, client_session=http))
        self._http = http
        try:
            try:
                who = await self._until_stopped(api.whoami())
            except MatrixInvalidToken as exc:
                raise AdapterAuthError(f"matrix: the homeserver refused the access token ({exc.errcode})") from None
            if who is None:
                return
            if self.cfg.user_id and who.user_id != self.cfg.user_id:
                raise AdapterAuthError(f"matrix: the access token is {who.user_id}'s, not {self.cfg.user_id}'s")
            self.user_id = api.mxid = who.user_id
            self._api = api
            since = await asyncio.to_thread(self._load_batch)
            if since is None:
                first = await self._until_stopped(self._sync(api, None, timeout_s=0))
                if first is None:
                    return
                self._handle(first, answer=False)  # history before kith: rooms and invites, no turns
                since = str(first.get("next_batch") or "")
                await asyncio.to_thread(self._save_batch, since)
            self.mark_connected()
            self.ready.set()
            while not self._stop.is_set():
                data = await self._until_stopped(self._sync(api, since, timeout_s=self.cfg.sync_timeout_s))
                if data is None:
                    return
                self._handle(data, answer=True)
                since = str(data.get("next_batch") or since)
                await asyncio.to_thread(self._save_batch, since)
        finally:
            self.ready.clear()
            self._api = None
            await self._tasks.cancel_all()
            await http.close()
            self._http = None

    async def _sync(self, api: ClientAPI, since: str | None, *, timeout_s: int) -> dict[str, Any]:
        try:
            data = await api.sync(since=since, timeout=timeout_s * 1000)
        except MatrixInvalidToken as exc:
            raise AdapterAuthError(f"matrix: the homeserver refused the access token ({exc.errcode})") from None
        if not isinstance(data, dict):
            raise ValueError("sync answer is not an object")
        self.touch()
        self.stats["syncs"] += 1
        return data

    async def _until_stopped(self, call: Awaitable[T]) -> T | None:
        """``call``'s result, or None once ``stop()`` was asked for (a long poll must not hold it up)."""
        return await unless_set(call, self._stop)

    async def stop(self) -> None:
        self._stop.set()

    def health(self) -> dict[str, Any]:
        return {"user_id": self.user_id, **self.stats}

    def _load_batch(self) -> str | None:
        try:
            saved = json.loads(self._store.read_text())
        except (OSError, ValueError):
            return None
        # A token belongs to one account's timeline: another account starts afresh.
        if not isinstance(saved, dict) or saved.get("user_id") != self.user_id:
            return None
        # Which rooms are DMs was learnt from invites that an incremental sync never repeats.
        direct = saved.get("direct")
        if isinstance(direct, list):
            self._direct |= {room for room in direct if isinstance(room, str)}
        batch = saved.get("next_batch")
        return batch if isinstance(batch, str) and batch else None

    def _save_batch(self, batch: str) -> None:
        self._store.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._store.with_suffix(".tmp")
        direct = sorted(self._direct - set(self.cfg.dm_rooms))
        tmp.write_text(json.dumps({"user_id": self.user_id, "next_batch": batch, "direct": direct}))
        os.replace(tmp, self._store)

    # ------------------------------------------------------------------------------------- inbound
    def _handle(self, data: dict[str, Any], *, answer: bool) -> None:
        for event in _events(data.get("account_data")):
            if event.get("type") == "m.direct" and isinstance(event.get("content"), dict):
                self._direct |= {room for rooms in event["content"].values() if isinstance(rooms, list)
                                 for room in rooms if isinstance(room, str)}  # fmt: skip
        rooms = data.get("rooms") if isinstance(data.get("rooms"), dict) else {}
        for room_id, room in _rooms(rooms, "invite"):
            self._invited(room_id, room)
        for room_id, room in _rooms(rooms, "join"):
            for event in _events(room.get("state")) + _events(room.get("timeline")):
                self._state(room_id, event)
            if not answer:
                continue
            for event in _events(room.get("timeline")):
                self._timeline(room_id, event)
        for room_id, _room in _rooms(rooms, "leave"):
            self._direct.discard(room_id)
            self._names.pop(room_id, None)

    def _invited(self, room_id: str, room: dict[str, Any]) -> None:
        invite = next((e for e in _events(room.get("invite_state"))
                       if e.get("type") == "m.room.member" and e.get("state_key") == self.user_id), None)  # fmt: skip
        if invite is None:
            return
        content = invite.get("content") if isinstance(invite.get("content"), dict) else {}
        if content.get("is_direct") is True:
            self._direct.add(room_id)
        if self.cfg.auto_join:
            self._tasks.spawn(self._join(room_id))

    async def _join(self, room_id: str) -> None:
        api = self._api
        if api is None:
            return
        try:
            await api.join_room_by_id(room_id)  # type: ignore[arg-type]
            self.stats["joined"] += 1
        except MatrixRequestError as exc:
            log.warning("matrix: could not join %s: %s", room_id, exc.errcode)

    def _state(self, room_id: str, event: dict[str, Any]) -> None:
        if event.get("type") == "m.room.member" and event.get("state_key") == self.user_id:
            content = event.get("content") if isinstance(event.get("content"), dict) else {}
            name = content.get("displayname")
            if isinstance(name, str) and name:
                self._names[room_id] = name
            if content.get("is_direct") is True:
                self._direct.add(room_id)

    def _timeline(self, room_id: str, event: dict[str, Any]) -> None:
        if event.get("type") == "m.room.encrypted":
            self.stats["encrypted_ignored"] += 1
            log.warning("matrix: encrypted message in %s ignored (end-to-end encryption is not supported)", room_id)
            return
        if event.get("type") != "m.room.message":
            return
        try:
            message = self.normalize(room_id, event)
        except (ValueError, TypeError, KeyError) as exc:
            self.stats["refused"] += 1
            log.warning("matrix: event in %s refused: %s", room_id, exc)
            return
        if message is None:
            return
        self.stats["events"] += 1
        self._tasks.spawn(self._turn(message))

    def normalize(self, room_id: str, event: dict[str, Any]) -> InboundMessage | None:
        sender, event_id = event["sender"], event["event_id"]
        content = event.get("content")
        if not isinstance(sender, str) or not isinstance(event_id, str) or not isinstance(content, dict):
            raise ValueError("malformed event")
        if sender == self.user_id:
            return None
        relates = content.get("m.relates_to") if isinstance(content.get("m.relates_to"), dict) else {}
        edit_of = ""
        if relates.get("rel_type") == "m.replace":
            if self.cfg.edits == "ignore" or not isinstance(content.get("m.new_content"), dict):
                return None
            edit_of = str(relates.get("event_id") or "")
            content = content["m.new_content"]
        msgtype, body = content.get("msgtype"), content.get("body", "")
        if not isinstance(body, str):
            raise ValueError("body is not a string")
        if msgtype == "m.notice":
            return None  # bots speak in notices: answering one would start a loop between two bots
        attachments: tuple[Attachment, ...] = ()
        if msgtype in _KINDS:
            attachments = (self._attachment(msgtype, content),)
            filename = content.get("filename")
            body = body if isinstance(filename, str) and filename and filename != body else ""  # a caption
        elif msgtype not in ("m.text", "m.emote"):
            return None
        in_reply = relates.get("m.in_reply_to") if isinstance(relates.get("m.in_reply_to"), dict) else {}
        reply_to = str(in_reply.get("event_id") or "")
        text = _strip_reply_fallback(body) if reply_to else body
        if len(text) > self.max_message_chars * 4:
            raise ValueError(f"text of {len(text)} characters is over the limit")
        if not text and not attachments:
            return None
        direct = room_id in self._direct
        ts = event.get("origin_server_ts")
        return InboundMessage(
            channel=self.name, account_id=sender, conversation_id=room_id,
            kind=ConversationKind.DM if direct else ConversationKind.GROUP,
            display_name=_display(sender), text=text, message_id=event_id,
            timestamp=datetime.fromtimestamp(ts / 1000, UTC) if isinstance(ts, int) else None,
            attachments=attachments, reply_to=reply_to,
            mentioned=direct or self._addressed(room_id, content, text, reply_to),
            raw={"room_id": room_id, "event_id": event_id, "edit_of": edit_of},
        )  # fmt: skip

    def _addressed(self, room_id: str, content: dict[str, Any], text: str, reply_to: str) -> bool:
        if reply_to and reply_to in self._ours:
            return True
        mentions = content.get("m.mentions")
        if isinstance(mentions, dict):
            # Intentional mentions (Matrix 1.7): a client that sends them has said whom it mentions,
            # so the bot's name merely appearing in the text (a quote, "kith is great") is no mention.
            users = mentions.get("user_ids")
            return isinstance(users, list) and self.user_id in users
        lowered = text.lower()
        names = [self.user_id, self._names.get(room_id, ""), _display(self.user_id)]
        return any(name and name.lower() in lowered for name in names)

    @staticmethod
    def _attachment(msgtype: str, content: dict[str, Any]) -> Attachment:
        url = content.get("url")
        if not isinstance(url, str):
            # An encrypted file (``content.file``) needs keys kith does not hold.
            raise ValueError("file without an mxc:// url (encrypted media is not supported)")
        mxc_download_path(url)  # ValueError for anything but mxc://
        info = content.get("info") if isinstance(content.get("info"), dict) else {}
        filename = content.get("filename") or content.get("body") or ""
        size = info.get("size")
        return Attachment(kind=_KINDS[msgtype], name=str(filename)[:255], mime_type=str(info.get("mimetype") or ""),
                          size=size if isinstance(size, int) and size >= 0 else 0, platform_id=url)  # fmt: skip

    async def _turn(self, message: InboundMessage) -> None:
        reply_to = message.message_id if message.kind is ConversationKind.GROUP else ""
        stream = self._streamer(message.conversation_id, reply_to)

        async def turn(on_delta: OnDelta | None) -> Reply | None:
            return await while_showing(self._typing(message.conversation_id),
                                       self.gateway.handle_inbound(message, on_delta=on_delta))

        async def deliver(reply: Reply) -> None:
            await self._deliver(message.conversation_id, self.reply_chunks(reply), reply_to=reply_to,
                                notice=reply.notice)  # fmt: skip

        _reply, streamed = await streamed_turn(stream, turn, deliver)
        self.stats["streamed"] += streamed

    def _streamer(self, room_id: str, reply_to: str) -> StreamedReply[str] | None:
        api = self._api
        if not self.cfg.stream or api is None:
            return None
        return StreamedReply(_RoomTarget(self, api, room_id, reply_to), limit=self.max_message_chars,
                             retry_after=retry_after_seconds, settings=self.cfg.stream_settings(),
                             what=f"matrix {room_id}")

    async def _typing(self, room_id: str) -> None:
        api = self._api
        if api is None:
            return
        try:
            await asyncio.sleep(0.8)  # strangers' messages are dropped before this and show no typing
            while True:  # renewed before it lapses: a long answer or tool call keeps showing it
                await api.set_typing(room_id, timeout=_TYPING_MS)  # type: ignore[arg-type]
                await asyncio.sleep(_TYPING_MS / 1000 * 0.8)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(api.set_typing(room_id, timeout=0))  # type: ignore[arg-type]


    # --------------------------------------------------------------------------------------- media
    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        what = f"the {attachment.kind} {attachment.name!r}" if attachment.name else f"the {attachment.kind}"
        check_declared(attachment.size, max_bytes, what)
        try:
            path = mxc_download_path(attachment.platform_id)
        except ValueError:
            raise AttachmentUnavailable(f"{what} has no mxc:// address") from None
        http = self._http
        if http is None:
            raise AttachmentUnavailable(f"Matrix is not connected right now, so {what} cannot be fetched")
        token = self.cfg.access_token.get_secret_value() if self.cfg.access_token else ""
        return await download(http, self.cfg.homeserver + path, max_bytes=max_bytes, what=what,
                              headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    async def send_file(self, address: ConversationAddress, *, name: str, mime_type: str, data: bytes) -> str:
        """Upload ``data`` to the content repository and post it to the room; the event id."""
        api = self._require()
        try:
            mxc = await api.upload_media(data, mime_type=mime_type, filename=name)
            content = {"msgtype": msgtype_for(mime_type), "body": name, "filename": name, "url": str(mxc),
                       "info": {"mimetype": mime_type, "size": len(data)}}  # fmt: skip
            return await self._send_event(address.conversation_id, content)
        except MatrixRequestError as exc:
            raise AttachmentUnavailable(f"the homeserver refused {name!r} ({exc.errcode or exc.http_status})") from None

    # ------------------------------------------------------------------------------------ outbound
    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        await self._deliver(address.conversation_id, self.reply_chunks(reply), notice=reply.notice)

    async def _deliver(self, room_id: str, chunks: list[str], *, reply_to: str = "", notice: bool = False) -> None:
        for i, chunk in enumerate(chunks):
            content: dict[str, Any] = {"msgtype": "m.notice" if notice else "m.text", "body": chunk}
            if reply_to and i == 0:
                content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
            await self._send_event(room_id, content)

    async def _send_event(self, room_id: str, content: dict[str, Any]) -> str:
        api = self._require()
        await self._limiter.acquire(room_id)
        txn = f"kith{uuid.uuid4().hex}"  # one per event, kept across retries: the server sends it once
        event_id = await with_retry(
            lambda: api.send_message_event(room_id, EventType.ROOM_MESSAGE, content, txn_id=txn),  # type: ignore[arg-type]
            retry_after=retry_after_seconds, what="matrix send",
        )  # fmt: skip
        self._ours.append(str(event_id))
        self.stats["sent"] += 1
        return str(event_id)

    def _require(self) -> ClientAPI:
        if self._api is None:
            raise RuntimeError("matrix adapter is not connected")
        return self._api


class _RoomTarget:
    """A room a reply streams into (``gateway.delivery.stream.MessageTarget``): an ``m.text`` event, then
    edits of it (``m.replace`` with ``m.new_content``, the fallback body starred as clients expect), a
    redaction for a surplus one. Handles are event ids."""

    drafts = False

    def __init__(self, adapter: MatrixAdapter, api: ClientAPI, room_id: str, reply_to: str) -> None:
        self._adapter, self._api, self._room, self._reply_to = adapter, api, room_id, reply_to

    async def _send(self, content: dict[str, Any]) -> str:
        await self._adapter._limiter.acquire(self._room)
        event_id = str(await self._api.send_message_event(self._room, EventType.ROOM_MESSAGE, content,  # type: ignore[arg-type]
                                                          txn_id=f"kith{uuid.uuid4().hex}"))  # fmt: skip
        self._adapter._ours.append(event_id)
        return event_id

    async def post(self, text: str) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": text}
        if self._reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": self._reply_to}}
            self._reply_to = ""  # only the first message quotes the question
        event_id = await self._send(content)
        self._adapter.stats["sent"] += 1
        return event_id

    async def edit(self, handle: str, text: str) -> None:
        new = {"msgtype": "m.text", "body": text}
        await self._send({"msgtype": "m.text", "body": f"* {text}", "m.new_content": new,
                          "m.relates_to": {"rel_type": "m.replace", "event_id": handle}})

    async def seal(self, handle: str | None, text: str) -> str:
        return await self.post(text)  # never called: no drafts on Matrix

    async def delete(self, handle: str) -> None:
        await self._adapter._limiter.acquire(self._room)
        await self._api.redact(self._room, handle)  # type: ignore[arg-type]


def _rooms(rooms: Any, section: str) -> list[tuple[str, dict[str, Any]]]:
    found = rooms.get(section) if isinstance(rooms, dict) else None
    if not isinstance(found, dict):
        return []
    return [(k, v) for k, v in found.items() if isinstance(k, str) and isinstance(v, dict)]


def _events(container: Any) -> list[dict[str, Any]]:
    events = container.get("events") if isinstance(container, dict) else None
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _display(user_id: str) -> str:
    """``@ada:example.org`` -> ``ada``: a name for the transcript when no display name is known."""
    return user_id[1:].split(":", 1)[0] if user_id.startswith("@") else user_id


def _strip_reply_fallback(body: str) -> str:
    """A reply's body starts with the quoted original (``> <@x> text`` lines, then a blank line) in
    clients that still send the fallback; the turn is the new text only."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    i = 0
    while i < len(lines) and lines[i].startswith(">"):
        i += 1
    return "\n".join(lines[i:]).lstrip("\n")
