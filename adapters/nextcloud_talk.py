"""Nextcloud Talk bot: signed webhooks in, signed OCS replies out, implemented directly over aiohttp.

Inbound (Nextcloud -> us): ``POST <webhook_path>`` with an ActivityStreams 2.0 body and
``X-Nextcloud-Talk-Random`` + ``X-Nextcloud-Talk-Signature`` = hex HMAC-SHA256(secret, random + raw
body). The signature is checked on the raw bytes, in constant time, before anything is parsed; a
random or a message id seen before is a replay and is refused.

Outbound (us -> Nextcloud): ``POST /ocs/v2.php/apps/spreed/api/v1/bot/<room>/message`` with
``X-Nextcloud-Talk-Bot-Random`` + ``X-Nextcloud-Talk-Bot-Signature`` = HMAC(secret, random + message)
(for reactions: random + reaction). Messages are Markdown, at most 32,000 characters.

Every room is its own conversation (``conversation_id`` = room token), so shared rooms get their own
CHANNEL memory. Rooms are groups unless listed in ``dm_rooms`` or, with ``api_user`` set, the room
lookup says one-to-one.

Shared files: Talk delivers a share as an ``Activity`` whose note is named ``file_shared`` (older
servers: inside a ``Create``), its content the message ``{file}`` (or the caption) with a ``file``
rich-object parameter (id, name, size, mimetype, path, link); each becomes an ``Attachment`` whose
``platform_id`` is the Nextcloud file id. A bot has no files of its own, so ``fetch_attachment``
needs ``api_user`` + ``api_password`` (an app password of a user who is in the room, and so sees the
share): it finds the file in that user's tree with a WebDAV ``SEARCH`` by file id and downloads it
with a WebDAV ``GET``, on the configured server only. Without those credentials the file is
reported as unavailable, with what to configure. Several files shared at once come as one webhook
each; they, and whatever the person sends with them, are gathered into one turn until a one-second
pause.

Streaming (``stream: true``, with ``api_user``): the reply is written as that user through Talk's chat
API and grows by edits, where the server can edit (adapters/nextcloud_stream.py).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote
from xml.sax.saxutils import escape

import aiohttp
import yarl
from aiohttp import web

from adapters.body import BodyTooLarge, read_body
from adapters.download import check_declared, download
from adapters.nextcloud_config import NextcloudConfig
from adapters.nextcloud_stream import OwnMessages, RetryLater, RoomTarget, edits_supported, retry_after
from adapters.ratelimit import RateLimiter, with_retry
from gateway.adapter import Adapter
from gateway.delivery.stream import OnDelta, StreamedReply, streamed_turn
from gateway.media.errors import AttachmentUnavailable
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.nextcloud")

OCS_BOT = "/ocs/v2.php/apps/spreed/api/v1/bot"
OCS_ROOM = "/ocs/v2.php/apps/spreed/api/v4/room"
_ONE_TO_ONE_TYPES = {1, 5, 6}  # one-to-one, former one-to-one, note-to-self
_MAX_RANDOM_LEN = 256
_SEEN_TTL_S = 24 * 3600.0
_SEEN_MAX = 50_000
_SHARE_GAP_S = 1.0  # Talk posts one webhook per shared file, right after each other
_SHARE_MAX_PARTS = 10
_MAX_SEARCH_ANSWER = 256 * 1024  # a SEARCH for one file id answers a few hundred bytes
_DAV = "{DAV:}"
_OC = "{http://owncloud.org/ns}"
_NO_CREDENTIALS = (
    "Nextcloud Talk does not let bots download shared files; set channels.nextcloud.api_user and "
    "api_password (an app password of a Nextcloud user who is in the room) so kith can fetch {what}"
)


def sign(secret: bytes, random: str, payload: bytes) -> str:
    return hmac.new(secret, random.encode() + payload, hashlib.sha256).hexdigest()


class BadPayload(ValueError):
    """A signed webhook whose body we cannot use; answered 400 and logged, never raised further."""


class _Seen:
    """Bounded, expiring set: replays older than the TTL are caught by the core's persistent dedupe."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, float] = OrderedDict()

    def add(self, key: str) -> bool:
        """True if ``key`` is new (and now remembered)."""
        now = time.monotonic()
        while self._items and (len(self._items) > _SEEN_MAX or next(iter(self._items.values())) < now - _SEEN_TTL_S):
            self._items.popitem(last=False)
        if key in self._items:
            return False
        self._items[key] = now
        return True


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise BadPayload(f"{where}.{key} missing or not a string")
    return str(value)


def _obj(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise BadPayload(f"{key} missing or not an object")
    return value


class NextcloudTalkAdapter(Adapter):
    name: ClassVar[str] = "nextcloud"
    max_message_chars: ClassVar[int] = 32_000

    def __init__(self, gateway: Services, config: NextcloudConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("nextcloud", NextcloudConfig)
        super().__init__(gateway, cfg)
        self.cfg: NextcloudConfig = cfg
        if cfg.bot_secret is None or not cfg.base_url:
            raise ValueError("channels.nextcloud: base_url and bot_secret are required")
        self._secret = cfg.bot_secret.get_secret_value().encode()
        self._base = cfg.base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None
        self._stopped = asyncio.Event()
        self._randoms = _Seen()
        self._message_ids = _Seen()
        self._room_kinds: dict[str, ConversationKind] = {}
        self._room_locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._batches: dict[str, list[InboundMessage]] = {}
        self._batch_arrived: dict[str, asyncio.Event] = {}
        self._limiter = RateLimiter(
            per_key_rate=cfg.send_rate_per_s, per_key_burst=cfg.send_burst, global_rate=10, global_burst=20
        )
        self.stats = {"accepted": 0, "rejected_signature": 0, "rejected_replay": 0, "rejected_payload": 0,
                      "streamed": 0}
        self._can_edit: bool | None = None  # the server's edit-messages capability, once asked
        self._own = OwnMessages()  # what the stream posted as api_user: its webhooks are not turns

    # ----------------------------------------------------------------------------------- lifecycle
    def routes(self) -> list[web.RouteDef]:
        return [web.post(self.cfg.webhook_path, self._webhook)]

    async def run(self) -> None:
        self._stopped.clear()
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        self.mark_connected()
        log.info("nextcloud: accepting webhooks on %s", self.cfg.webhook_path)
        await self._stopped.wait()

    async def stop(self) -> None:
        self._stopped.set()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    def health(self) -> dict[str, Any]:
        return dict(self.stats)

    # ------------------------------------------------------------------------------------- inbound
    async def _webhook(self, request: web.Request) -> web.Response:
        random = request.headers.get("X-Nextcloud-Talk-Random", "")
        signature = request.headers.get("X-Nextcloud-Talk-Signature", "")
        if not random or not signature or len(random) > _MAX_RANDOM_LEN or len(signature) != 64:
            self.stats["rejected_signature"] += 1
            log.warning("nextcloud: webhook without a well-formed signature from %s", request.remote)
            return web.Response(status=401)
        try:
            body = await read_body(request, self.cfg.max_body_bytes)
        except BodyTooLarge as exc:
            self.stats["rejected_payload"] += 1
            log.warning("nextcloud: webhook body too large (%s, max %d) refused", exc, self.cfg.max_body_bytes)
            return web.Response(status=413)
        except TimeoutError:
            self.stats["rejected_payload"] += 1
            log.warning("nextcloud: webhook body not complete in time from %s", request.remote)
            return web.Response(status=408)
        expected = sign(self._secret, random, body)
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            self.stats["rejected_signature"] += 1
            log.warning("nextcloud: webhook with a wrong signature from %s", request.remote)
            return web.Response(status=401)
        if not self._randoms.add(random):
            self.stats["rejected_replay"] += 1
            log.warning("nextcloud: replayed webhook (random seen before) refused")
            return web.Response(status=409)
        self.touch()
        try:
            message = self._parse(body)
        except BadPayload as exc:
            self.stats["rejected_payload"] += 1
            log.warning("nextcloud: signed webhook with a bad payload refused: %s", exc)
            return web.Response(status=400)
        if message is None:
            return web.Response(status=200)  # an event we do not act on (join, leave, reaction)
        if not self._message_ids.add(f"{message.conversation_id}:{message.message_id}"):
            self.stats["rejected_replay"] += 1
            log.warning("nextcloud: replayed message %s refused", message.message_id)
            return web.Response(status=409)
        self.stats["accepted"] += 1
        key = f"{message.conversation_id}\n{message.account_id}"
        batch = self._batches.get(key)
        if batch is not None:
            batch.append(message)  # joins the files this person is sharing right now
            self._batch_arrived[key].set()
        elif message.raw.get("file_share"):
            self._spawn(self._gather(key, message), f"nextcloud:share:{message.message_id}")
        else:
            self._spawn(self._turn(message), f"nextcloud:turn:{message.message_id}")
        return web.Response(status=200)

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _gather(self, key: str, first: InboundMessage) -> None:
        """Several files shared at once arrive as one webhook each (the caption, if any, on the
        last); whatever the same person sends in the room until a gap of ``_SHARE_GAP_S`` joins
        the first share's turn, so the model sees the files and the words together."""
        self._batches[key] = parts = [first]
        arrived = self._batch_arrived[key] = asyncio.Event()
        try:
            while len(parts) < _SHARE_MAX_PARTS:
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), _SHARE_GAP_S)
                except TimeoutError:
                    break
        finally:
            self._batches.pop(key, None)
            self._batch_arrived.pop(key, None)
        await self._turn(merge_parts(parts))

    def _parse(self, body: bytes) -> InboundMessage | None:
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadPayload(f"not JSON: {exc.__class__.__name__}") from None
        if not isinstance(data, dict):
            raise BadPayload("top level is not an object")
        kind = data.get("type")
        if not isinstance(kind, str):
            raise BadPayload("type missing")
        raw_obj = data.get("object")
        # A file shared into the room is a system message in Talk: bots get it as an "Activity"
        # whose note is named after the raw system message. Every other Activity (joins, renames,
        # calls) is not a conversation turn.
        shared = kind == "Activity" and isinstance(raw_obj, dict) and raw_obj.get("name") == "file_shared"
        if kind != "Create" and not shared:
            log.debug("nextcloud: ignoring %s event", kind)
            return None
        actor, obj, target = _obj(data, "actor"), _obj(data, "object"), _obj(data, "target")
        if actor.get("type") == "Application":
            return None  # another bot (or us): never answer bots, that is how loops start
        account_id = _str(actor, "id", "actor")
        room = _str(target, "id", "target")
        message_id = _str(obj, "id", "object")
        content_raw = obj.get("content")
        if not isinstance(content_raw, str):
            raise BadPayload("object.content missing or not a string")
        try:
            content = json.loads(content_raw)
        except json.JSONDecodeError:
            raise BadPayload("object.content is not JSON") from None
        if not isinstance(content, dict) or not isinstance(content.get("message"), str):
            raise BadPayload("object.content.message missing or not a string")
        if account_id == f"users/{self.cfg.api_user}" and self._own.ours(room, message_id, content["message"]):
            return None  # a reply kith streamed as api_user, coming back
        params = content.get("parameters") or {}
        if not isinstance(params, dict):
            raise BadPayload("object.content.parameters is not an object")
        text, attachments, mentioned = self._render(content["message"], params)
        if len(text) > self.max_message_chars:
            raise BadPayload(f"message of {len(text)} characters is over the platform limit")
        if not text and not attachments:
            return None
        name = actor.get("name")
        kind_ = self._room_kinds.get(room, ConversationKind.DM if room in self.cfg.dm_rooms else None)
        return InboundMessage(
            channel=self.name,
            account_id=account_id,
            display_name=name if isinstance(name, str) else "",
            conversation_id=room,
            kind=kind_ or ConversationKind.GROUP,  # refined by _room_kind before the turn
            text=text,
            message_id=f"{room}:{message_id}",
            timestamp=datetime.now(UTC),
            attachments=attachments,
            mentioned=mentioned,
            raw={"room_name": target.get("name", ""), "object_id": message_id, "kind_known": kind_ is not None,
                 "file_share": bool(attachments)},
        )

    def _render(self, message: str, params: Mapping[str, Any]) -> tuple[str, tuple[Attachment, ...], bool]:
        """Replace rich-object placeholders: mentions become @names, files become attachments."""
        attachments: list[Attachment] = []
        mentioned = f"@{self.cfg.bot_name.lower()}" in message.lower()
        text = message
        for key, value in params.items():
            if not isinstance(value, dict):
                continue
            ptype, pname, pid = str(value.get("type", "")), str(value.get("name", "")), str(value.get("id", ""))
            if ptype == "file":
                mime = str(value.get("mimetype", ""))
                attachments.append(
                    Attachment(
                        kind=_kind(mime),
                        name=pname,
                        mime_type=mime,
                        size=_size(value.get("size")),  # Talk sends it as a string
                        platform_id=pid,
                        url=str(value.get("link", "")),
                    )
                )
                text = text.replace("{" + key + "}", "")
                continue
            if ptype in ("bot", "app") or pid.startswith("bot-") or pname.lower() == self.cfg.bot_name.lower():
                mentioned = True
            text = text.replace("{" + key + "}", f"@{pname or pid}")
        return text.strip(), tuple(attachments), mentioned

    async def _room_kind(self, message: InboundMessage) -> InboundMessage:
        if message.raw.get("kind_known") or not self.cfg.api_user or self.cfg.api_password is None:
            return message
        room = message.conversation_id
        if room not in self._room_kinds:
            self._room_kinds[room] = await self._lookup_room_kind(room)
        kind = self._room_kinds[room]
        if kind is message.kind:
            return message
        return replace(message, kind=kind)

    async def _lookup_room_kind(self, room: str) -> ConversationKind:
        auth = self._basic_auth()
        assert auth is not None
        try:
            async with self._client().get(
                f"{self._base}{OCS_ROOM}/{room}",
                headers={"OCS-APIRequest": "true", "Accept": "application/json", "Authorization": auth},
            ) as resp:
                if resp.status != 200:
                    log.warning("nextcloud: room lookup for %s answered %d; treating it as a group", room, resp.status)
                    return ConversationKind.GROUP
                data = await resp.json(content_type=None)
            rtype = data["ocs"]["data"]["type"]
        except (TimeoutError, aiohttp.ClientError, KeyError, TypeError, ValueError) as exc:
            log.warning("nextcloud: room lookup for %s failed (%s); treating it as a group", room, type(exc).__name__)
            return ConversationKind.GROUP
        return ConversationKind.DM if rtype in _ONE_TO_ONE_TYPES else ConversationKind.GROUP

    async def _turn(self, message: InboundMessage) -> None:
        room = message.conversation_id
        lock = self._room_locks.setdefault(room, asyncio.Lock())
        try:
            async with lock:  # one turn at a time per room keeps replies in the order asked
                message = await self._room_kind(message)
                if self.cfg.ack_reaction:
                    await self.react(room, str(message.raw["object_id"]), self.cfg.ack_reaction)
                reply_to = str(message.raw["object_id"]) if message.kind is ConversationKind.GROUP else ""
                stream = await self._streamer(room, reply_to)

                async def turn(on_delta: OnDelta | None) -> Reply | None:
                    return await self.gateway.handle_inbound(message, on_delta=on_delta)

                async def deliver(reply: Reply) -> None:
                    await self._deliver(room, self.reply_chunks(reply), reply_to=reply_to)

                _reply, streamed = await streamed_turn(stream, turn, deliver)
                self.stats["streamed"] += streamed
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("nextcloud: turn for message %s in room %s failed", message.message_id, room)

    async def _streamer(self, room: str, reply_to: str) -> StreamedReply[int] | None:
        if not self.cfg.stream or self._basic_auth() is None:
            return None
        if self._can_edit is None and not await edits_supported(self):
            return None
        if not self._can_edit:
            return None
        return StreamedReply(RoomTarget(self, room, reply_to), limit=self.max_message_chars,
                             retry_after=retry_after, settings=self.cfg.stream_settings(),
                             what=f"nextcloud {room}")

    # ------------------------------------------------------------------------------------- media
    def _basic_auth(self) -> str | None:
        if not self.cfg.api_user or self.cfg.api_password is None:
            return None
        creds = f"{self.cfg.api_user}:{self.cfg.api_password.get_secret_value()}".encode()
        return "Basic " + base64.b64encode(creds).decode()

    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        what = f"the file {attachment.name!r}" if attachment.name else "the shared file"
        check_declared(attachment.size, max_bytes, what)
        auth = self._basic_auth()
        if auth is None:
            raise AttachmentUnavailable(_NO_CREDENTIALS.format(what=what))
        if not attachment.platform_id.isdigit():
            raise AttachmentUnavailable(f"{what} came without a Nextcloud file id")
        href, declared = await self._find_file(attachment.platform_id, auth, what)
        check_declared(declared, max_bytes, what)
        url = str(yarl.URL(self._base).origin()) + href
        return await download(self._client(), url, max_bytes=max_bytes, what=what, headers={"Authorization": auth})

    async def _find_file(self, file_id: str, auth: str, what: str) -> tuple[str, int]:
        """The WebDAV href (a path on the configured server) and size of ``file_id`` in api_user's tree."""
        user = self.cfg.api_user or ""
        home = f"{yarl.URL(self._base).path.rstrip('/')}/remote.php/dav/files/{user}/"
        body = _search_body(user, file_id)
        try:
            async with self._client().request(
                "SEARCH", f"{self._base}/remote.php/dav/", data=body.encode(),
                headers={"Authorization": auth, "Content-Type": "text/xml; charset=utf-8"}, allow_redirects=False,
            ) as resp:
                if resp.status == 401:
                    raise AttachmentUnavailable(f"Nextcloud refused the configured app password, so {what} "
                                                "cannot be fetched")
                if resp.status != 207:
                    raise AttachmentUnavailable(f"Nextcloud could not look up {what} (it answered {resp.status})")
                answer = await resp.content.read(_MAX_SEARCH_ANSWER + 1)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise AttachmentUnavailable(f"Nextcloud could not look up {what} ({exc.__class__.__name__})") from None
        if len(answer) > _MAX_SEARCH_ANSWER:
            raise AttachmentUnavailable(f"Nextcloud's answer about {what} was too long")
        for href, fid, size in _search_hits(answer):
            # The href must be a file in api_user's tree on this server; anything else is not fetched.
            path = unquote(href)
            if fid == file_id and path.startswith(home) and href.startswith("/") and ".." not in path.split("/"):
                return href, size
        raise AttachmentUnavailable(f"{what} is not visible to the Nextcloud user {user!r} (is it in the room?)")

    # ------------------------------------------------------------------------------------ outbound
    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # send() may be called for a proactive message while run() is between restarts.
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self._session


    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        await self._deliver(address.conversation_id, self.reply_chunks(reply))

    async def _deliver(self, room: str, chunks: list[str], *, reply_to: str = "") -> None:
        for i, chunk in enumerate(chunks):
            body: dict[str, Any] = {"message": chunk, "referenceId": secrets.token_hex(32)}
            if reply_to and i == 0 and reply_to.isdigit():
                body["replyTo"] = int(reply_to)
            await self._limiter.acquire(room)
            await with_retry(
                lambda body=body: self._post(f"{OCS_BOT}/{room}/message", body, signed=chunk_text(body)),
                retry_after=retry_after,
                what=f"nextcloud send to {room}",
            )

    async def react(self, room: str, message_id: str, reaction: str) -> None:
        await self._limiter.acquire(room)
        await with_retry(
            lambda: self._post(f"{OCS_BOT}/{room}/reaction/{message_id}", {"reaction": reaction}, signed=reaction),
            retry_after=retry_after,
            what=f"nextcloud reaction in {room}",
        )

    async def _post(self, path: str, body: dict[str, Any], *, signed: str) -> None:
        random = secrets.token_hex(32)
        headers = {
            "OCS-APIRequest": "true",
            "Accept": "application/json",
            "X-Nextcloud-Talk-Bot-Random": random,
            "X-Nextcloud-Talk-Bot-Signature": sign(self._secret, random, signed.encode()),
        }
        async with self._client().post(f"{self._base}{path}", json=body, headers=headers) as resp:
            if resp.status == 429:
                raise RetryLater(float(resp.headers.get("Retry-After", "2") or 2))
            if resp.status >= 400:
                text = (await resp.text())[:200]
                raise RuntimeError(f"nextcloud answered {resp.status} to {path}: {text}")
            self.touch()


def chunk_text(body: Mapping[str, Any]) -> str:
    return str(body["message"])


def merge_parts(parts: list[InboundMessage]) -> InboundMessage:
    """One turn for files shared together and the words sent with them: every attachment in order,
    the texts joined, the first part's ids (its message id is the dedupe key)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    return replace(
        first,
        text="\n\n".join(p.text for p in parts if p.text),
        attachments=tuple(a for p in parts for a in p.attachments),
        mentioned=any(p.mentioned for p in parts),
        raw={**first.raw, "merged_message_ids": tuple(p.message_id for p in parts)},
    )


def _kind(mime: str) -> str:
    for prefix, kind in (("image/", "photo"), ("audio/", "audio"), ("video/", "video")):
        if mime.startswith(prefix):
            return kind
    return "document"


def _size(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0


def _search_body(user: str, file_id: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<d:searchrequest xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">'
        "<d:basicsearch>"
        "<d:select><d:prop><oc:fileid/><d:getcontentlength/><d:getcontenttype/></d:prop></d:select>"
        f"<d:from><d:scope><d:href>/files/{escape(user)}</d:href><d:depth>infinity</d:depth></d:scope></d:from>"
        f"<d:where><d:eq><d:prop><oc:fileid/></d:prop><d:literal>{int(file_id)}</d:literal></d:eq></d:where>"
        "</d:basicsearch>"
        "</d:searchrequest>"
    )


def _search_hits(answer: bytes) -> list[tuple[str, str, int]]:
    """(href, fileid, size) for each response in a WebDAV multistatus; empty if it does not parse."""
    if b"<!DOCTYPE" in answer or b"<!ENTITY" in answer:
        return []  # a multistatus never needs a DTD; entities are how XML bombs are built
    try:
        root = ET.fromstring(answer)
    except ET.ParseError:
        return []
    hits = []
    for response in root.iter(f"{_DAV}response"):
        href = (response.findtext(f"{_DAV}href") or "").strip()
        fid = (response.findtext(f".//{_OC}fileid") or "").strip()
        size = _size((response.findtext(f".//{_DAV}getcontentlength") or "").strip())
        if href:
            hits.append((href, fid, size))
    return hits
