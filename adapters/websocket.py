"""WebSocket gateway adapter: web chat, ``kith chat`` and third-party clients (docs/protocol.md).

Security, in the order it is applied: the Origin header is checked before the upgrade (cross-site
pages cannot drive a local assistant); when a token is configured (always, beyond loopback) the
connection must authenticate (Authorization header, a signed-in ``kith_session`` cookie, or a first
``auth`` frame) before anything else; a frame above ``server.max_frame_bytes`` is answered
``too_large`` and the connection stays open (only one above ``ws_limits.hard_frame_bytes`` closes it
with 1009). A connection is one client for its lifetime (its first ``hello``); with a sign-in cookie
that client's account belongs to the cookie's person. New clients, messages and concurrent turns are
limited by ``adapters.ws_limits`` with keys that outlive connections. Authenticated connections are
trusted senders: they skip the pairing policy. What a client shows about its conversation (``ready``,
``state``, ``history``) comes from ``adapters.ws_conversation``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import WSCloseCode, WSMsgType, web

from adapters import ws_conversation
from adapters.ws_limits import WebSocketLimits, hard_frame_bytes
from gateway.adapter import Adapter, AdapterRegistry
from gateway.delivery.acks import acknowledge, expect_ack
from gateway.delivery.buttons import offered
from gateway.delivery.missed import replay_missed
from gateway.hookspecs import hookimpl
from gateway.http.auth import tokens_match
from gateway.http.guard import HTTP_POLICY
from gateway.http.principal import principal_or_none
from gateway.http.signin import is_local
from gateway.identity.owner import attach_client, local_person
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.media.limits import media_limits
from gateway.media.uploads import uploads
from gateway.types import (
    Attachment,
    ConversationAddress,
    ConversationKind,
    InboundMessage,
    Reply,
    ToolCall,
    Turn,
    UserRef,
)
from gateway.web import serve

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.websocket")

CLOSE_UNAUTHORIZED = 4401
AUTH_TIMEOUT_S = 10.0
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
MAX_TEXT_CHARS = 32_000


class FrameError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_frame(data: str) -> dict[str, Any]:
    try:
        frame = json.loads(data)
    except ValueError as exc:
        raise FrameError("bad_json", "frame is not valid JSON") from exc
    except RecursionError:
        # The C decoder stops at the interpreter's recursion limit; no frame of ours nests deeper
        # than three levels, so anything that deep is not a frame.
        raise FrameError("bad_json", "frame nests too deeply") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise FrameError("bad_frame", "frame must be a JSON object with a string 'type'")
    return frame


class Connection:
    """One client connection: auth state, identity and ordered message handling."""

    def __init__(self, adapter: WebSocketAdapter, ws: web.WebSocketResponse, authed: bool, remote: str,
                 signed_in: str | None = None, owner: bool = False) -> None:  # fmt: skip
        self.adapter = adapter
        self.ws = ws
        self.authed = authed
        self.remote = remote  # the client's address: the key of its new-user allowance
        self.signed_in = signed_in  # the person of the upgrade's kith_session cookie: hello's account is theirs
        self.owner = owner  # loopback without a token: this client is the local owner (docs/web.md#one-owner)
        self.client_id = ""  # set once, by the first hello: a connection is one client for its lifetime
        self.user_id = ""
        self.name = ""
        self.shown: dict[str, Any] = {}  # the conversation state this client was last sent
        # Messages run one at a time, in order, in their own task, so the receive loop keeps
        # answering pings and reading frames while a long model call streams.
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=32)
        self.worker: asyncio.Task[None] | None = None
        self.busy = False
        self.closing = False
        self.acks = False  # the client acknowledges proactive frames ("acks": true in its hello)
        # The message being answered now: its id, its platform message id, and the event that stops it.
        self.current: tuple[Any, str, asyncio.Event] | None = None

    async def _work(self) -> None:
        while not self.closing:
            frame = await self.queue.get()
            self.busy = True
            try:
                await self._message(frame)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("websocket message handling failed")
                await self.error("internal", "the message could not be processed", frame.get("id"))
            finally:
                self.busy = False

    def close(self) -> None:
        """The client left. A turn already running finishes (and is persisted); messages still
        waiting are dropped: nobody is there to read their replies, and they would spend model calls."""
        self.closing = True
        dropped = 0
        while not self.queue.empty():
            self.queue.get_nowait()
            dropped += 1
        if dropped:
            log.info("websocket client %s left; %d queued messages dropped", self.client_id or "-", dropped)
        if self.worker is not None and not self.busy:
            self.worker.cancel()

    async def send(self, frame: dict[str, Any]) -> bool:
        """Send a frame; False when the socket is already closed (nothing was delivered)."""
        if self.ws.closed:
            return False
        try:
            await self.ws.send_json(frame)
        except ConnectionError:
            return False
        return True

    async def error(self, code: str, message: str, ref: Any = None) -> None:
        frame: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if ref is not None:
            frame["id"] = ref
        await self.send(frame)

    def user(self) -> UserRef | None:
        """The person this client's account belongs to now (a /link merge may have moved it)."""
        return self.adapter.gateway.identities.resolve(self._message_obj("", ""), create=False)

    async def push_state(self, user: UserRef | None = None) -> None:
        """Send a ``state`` frame when the conversation changed since this client last saw it.
        ``user``: this client's person as resolved just now (else it is looked up)."""
        user = user or self.user()
        if user is None or not self.client_id:
            return
        self.user_id = user.user_id
        state = ws_conversation.conversation_state(self.adapter.gateway, user, self._message_obj("", ""))
        if state != self.shown:
            self.shown = state
            await self.send({"type": "state", **state})

    async def error_too_large(self, data: str, limit: int) -> None:
        """An oversize frame is answered, naming its id when one can be read, and forgotten."""
        try:
            ref = json.loads(data).get("id")
        except (ValueError, RecursionError, AttributeError):
            ref = None
        frame: dict[str, Any] = {"type": "error", "code": "too_large", "limit": limit,
                                 "message": f"frames are limited to {limit} bytes"}
        if isinstance(ref, (str, int)) and not isinstance(ref, bool):
            frame["id"] = ref
        await self.send(frame)

    async def handle(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "ping":
            await self.send({"type": "pong"})
            return
        if kind == "auth":
            await self._auth(frame)
            return
        if not self.authed:
            await self.error("unauthorized", "authenticate first with an 'auth' frame")
            await self.ws.close(code=CLOSE_UNAUTHORIZED, message=b"unauthorized")
            return
        if kind == "hello":
            await self._hello(frame)
        elif kind == "history":
            await self._history(frame)
        elif kind == "ack":
            await self._ack(frame)
        elif kind == "cancel":
            await self._cancel(frame)
        elif kind == "message":
            if self.worker is None:
                self.worker = asyncio.create_task(self._work(), name=f"ws:{self.client_id or 'anon'}")
            try:
                self.queue.put_nowait(frame)
            except asyncio.QueueFull:
                await self.error("busy", "too many messages waiting; wait for the replies", frame.get("id"))
        else:
            await self.error("unknown_type", f"unknown frame type {kind!r}", frame.get("id"))

    async def _auth(self, frame: dict[str, Any]) -> None:
        token = self.adapter.token
        given = frame.get("token")
        if token is not None and not (isinstance(given, str) and tokens_match(given, token)):
            await self.error("unauthorized", "invalid token")
            await self.ws.close(code=CLOSE_UNAUTHORIZED, message=b"unauthorized")
            return
        self.authed = True
        if "client_id" in frame:
            await self._hello(frame)
        else:
            await self.send({"type": "auth_ok"})

    async def _hello(self, frame: dict[str, Any]) -> None:
        client_id = frame.get("client_id")
        name = frame.get("name", "")
        if not isinstance(client_id, str) or not _CLIENT_ID.match(client_id):
            await self.error("bad_frame", "client_id must be 1-128 characters of [A-Za-z0-9._:-]")
            return
        if not isinstance(name, str) or len(name) > 100:
            await self.error("bad_frame", "name must be a string of at most 100 characters")
            return
        if not isinstance(frame.get("acks", False), bool):
            await self.error("bad_frame", "'acks' must be true or false")
            return
        if self.client_id and client_id != self.client_id:
            # One identity per connection: otherwise one socket mints users by the thousand, and
            # the connections map keeps an entry for an id the socket no longer answers to.
            await self.error("already_identified", f"this connection is client {self.client_id!r}; "
                             "open a new connection for another client_id")
            return
        gw = self.adapter.gateway
        if self.owner and self.signed_in is None:
            self.signed_in = local_person(gw.identities, client_id=client_id, name=name)
        owner = gw.identities.lookup("websocket", client_id)
        if self.signed_in is not None and owner not in (None, self.signed_in):
            # The cookie names the person; an account of someone else is not taken over (nor merged).
            await self.error("account_taken", "this client_id belongs to another person; "
                             "sign in there, or use a new client_id")
            return
        if not self.client_id and owner is None:
            # A new account costs a row either way (a new person, or one more client of the signed-in one).
            refusal = self.adapter.limits.new_user(self.remote)
            if refusal is not None:
                await self.error("rate_limited", refusal)
                return
            if self.signed_in is not None:
                self._attach(client_id, name)
        self.client_id, self.name = client_id, name
        self.acks = frame.get("acks") is True
        user = gw.identities.resolve(self._message_obj("", ""))
        assert user is not None
        self.user_id = user.user_id
        self.adapter.connections.setdefault(client_id, set()).add(self)
        self.shown = ws_conversation.conversation_state(gw, user, self._message_obj("", ""))
        await self.send({"type": "ready", "user_id": user.user_id, **self.shown,
                         "accounts": ws_conversation.accounts(gw, user.user_id),
                         "model_ready": gw.model_ready, "notice": "" if gw.model_ready else gw.model_help})
        # Proactive messages no channel could take while this person was away (gateway/delivery/missed.py).
        await replay_missed(gw, user.user_id, self.send, acks=self.acks)

    async def _ack(self, frame: dict[str, Any]) -> None:
        """The client has a proactive frame: its outbox row is sent (gateway/delivery/acks.py). An ack
        of a row that is not this person's, or not in flight, changes nothing and is not answered."""
        delivery_id = frame.get("delivery_id")
        if not isinstance(delivery_id, str) or not 0 < len(delivery_id) <= 512:
            await self.error("bad_frame", "'delivery_id' must be the string of a proactive frame", frame.get("id"))
            return
        if not self.client_id:
            await self.error("no_hello", "send a 'hello' frame with your client_id first", frame.get("id"))
            return
        acknowledge(self.adapter.gateway, delivery_id, self.user_id)

    async def _cancel(self, frame: dict[str, Any]) -> None:
        """Stop the reply being written now (its ``id``, or whichever when none is named). Handled here, in
        the receive loop, while the worker awaits the model. An id not being answered (the reply went
        out an instant ago, or it never existed) changes nothing and is not answered."""
        ref = frame.get("id")
        if ref is not None and (not isinstance(ref, (str, int)) or isinstance(ref, bool)):
            await self.error("bad_frame", "'id' must be a string or a number")
            return
        current = self.current
        if current is not None and (ref is None or ref == current[0]):
            current[2].set()

    def _attach(self, client_id: str, name: str) -> None:
        """A new client of a signed-in browser or of the local owner: its account joins that person."""
        assert self.signed_in is not None
        attach_client(self.adapter.gateway.identities, self.signed_in, client_id, name,
                      source="owner" if self.owner else "signin")  # fmt: skip

    async def _history(self, frame: dict[str, Any]) -> None:
        ref = frame.get("id")
        if not self.client_id:
            await self.error("no_hello", "send a 'hello' frame with your client_id first", ref)
            return
        before, limit = frame.get("before_seq"), frame.get("limit", ws_conversation.DEFAULT_HISTORY)
        if before is not None and (not isinstance(before, int) or isinstance(before, bool) or before < 1):
            await self.error("bad_frame", "'before_seq' must be a positive integer", ref)
            return
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= ws_conversation.MAX_HISTORY:
            await self.error("bad_frame", f"'limit' must be 1-{ws_conversation.MAX_HISTORY}", ref)
            return
        user = self.user()
        if user is None:
            return
        page = ws_conversation.history(self.adapter.gateway, user, self._message_obj("", ""), before_seq=before,
                                       limit=limit)  # fmt: skip
        out: dict[str, Any] = {"type": "history", "session_id": page.session_id, "messages": page.messages,
                               "more": page.more}
        if ref is not None:
            out["id"] = ref
        await self.send(out)

    def _message_obj(self, text: str, message_id: str, tier: int | None = None,
                     attachments: tuple[Attachment, ...] = (), redo: str | None = None) -> InboundMessage:  # fmt: skip
        raw: dict[str, Any] = {"tier": tier} if tier is not None else {}
        if redo is not None:
            raw["redo"] = redo  # gateway/turn/protocol.py answers it without that exchange
        return InboundMessage(
            channel="websocket", account_id=self.client_id, conversation_id=self.client_id, text=text,
            kind=ConversationKind.DM, display_name=self.name, message_id=message_id,
            timestamp=datetime.now(UTC), trusted=True, raw=raw, attachments=attachments,
        )

    def _redo_problem(self, redo: Any) -> tuple[str, str] | None:
        """Why ``redo`` cannot be redone, as (code, message), or None: only the last exchange of the
        current session, answered, can be regenerated or edited (docs/protocol.md#regenerate-and-edit)."""
        if not isinstance(redo, str) or not 0 < len(redo) <= 64:
            return "bad_frame", "'redo' must be the turn_id of the last reply"
        user = self.user()
        if user is None:
            return "stale", "nothing to redo"
        last = ws_conversation.history(self.adapter.gateway, user, self._message_obj("", ""), before_seq=None,
                                       limit=1).messages  # fmt: skip
        if not last or last[-1]["role"] != "assistant" or last[-1]["turn_id"] != redo:
            return "stale", "only the last reply of the current conversation can be regenerated or edited"
        return None

    def _attachments(self, value: Any) -> tuple[Attachment, ...] | str:
        """The frame's ``attachments`` (upload ids of ``POST /api/uploads``, this person's own) or why not."""
        if value is None:
            return ()
        most = media_limits(self.adapter.gateway).max_files
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) > most:
            return f"'attachments' must be a list of at most {most} upload ids"
        held = uploads(self.adapter.gateway)
        out = []
        for upload_id in value:
            upload = held.get(upload_id, user_id=self.user_id)
            if upload is None:
                return f"unknown upload {upload_id[:40]!r}: upload the file again (uploads are kept for an hour)"
            out.append(Attachment(kind=_kind(upload.mime_type), name=upload.name, mime_type=upload.mime_type,
                                  size=len(upload.data), platform_id=upload.upload_id))  # fmt: skip
        return tuple(out)

    async def _message(self, frame: dict[str, Any]) -> None:
        ref = frame.get("id")
        if ref is not None and not isinstance(ref, (str, int)):
            await self.error("bad_frame", "'id' must be a string or a number")
            return
        if not self.client_id:
            await self.error("no_hello", "send a 'hello' frame with your client_id first", ref)
            return
        text = frame.get("text", "" if frame.get("attachments") else None)
        attachments = self._attachments(frame.get("attachments"))
        if isinstance(attachments, str):
            await self.error("bad_attachment", attachments, ref)
            return
        if not isinstance(text, str) or not (text.strip() or attachments):
            await self.error("bad_frame", "'text' must be a non-empty string", ref)
            return
        if len(text) > MAX_TEXT_CHARS:
            await self.error("too_long", f"'text' is limited to {MAX_TEXT_CHARS} characters", ref)
            return
        tier = frame.get("tier")
        if tier is not None and (not isinstance(tier, int) or isinstance(tier, bool) or not 1 <= tier <= 4):
            await self.error("bad_frame", "'tier' must be a context tier 1-4", ref)
            return
        redo = frame.get("redo")
        if redo is not None and (problem := self._redo_problem(redo)) is not None:
            await self.error(*problem, ref)
            return
        limits = self.adapter.limits
        refusal = limits.message(self.user_id)
        if refusal is not None:
            await self.error("rate_limited", refusal, ref)
            return
        message_id = f"{self.client_id}:{ref}" if ref is not None else ""

        async def on_delta(piece: str) -> None:
            await self.send({"type": "delta", "id": ref, "text": piece})

        with limits.turn() as slot:
            if not slot:
                await self.error("busy", f"the server is answering {limits.max_turns} messages already; "
                                 "try again in a moment", ref)
                return
            stop = asyncio.Event()
            self.current = (ref, message_id, stop)
            try:
                await self.send({"type": "status", "id": ref, "state": "thinking"})
                reply = await self.adapter.gateway.handle_inbound(
                    self._message_obj(text, message_id, tier, attachments, redo), on_delta=on_delta, stop=stop)
            finally:
                self.current = None
        if reply is None:
            await self.send({"type": "reply", "id": ref, "text": "", "dropped": True})
            return
        out: dict[str, Any] = {"type": "reply", "id": ref, "text": reply.text, "session_id": reply.session_id,
                               "otr": reply.otr, "notice": reply.notice, "turn_id": reply.turn_id}
        if reply.stopped:
            out["stopped"] = True
        if reply.model_error:
            out["model_error"] = True  # docs/protocol.md#when-the-model-fails
        await self.send(out)
        # A command (or a session started after an idle gap) may have changed what every client of this
        # person shows; each is sent a state frame only if its view changed. (Whose: as of now, a /link
        # confirmed in this turn may have merged this client's person into another.)
        user = self.user()
        if user is not None:
            self.user_id = user.user_id
            await self.adapter.push_state(user.user_id, resolved=(self, user))


class WebSocketAdapter(Adapter):
    name = "websocket"
    max_message_chars = 1_000_000  # one frame carries the whole reply; the client renders it

    def __init__(self, gateway: Services, config: Any = None) -> None:
        super().__init__(gateway, config)
        secret = gateway.config.server.token
        self.token: str | None = secret.get_secret_value() if secret is not None else None
        self.connections: dict[str, set[Connection]] = {}
        self.limits = WebSocketLimits(gateway.config.server.rate_limit)
        self._stop = asyncio.Event()

    def routes(self) -> list[web.RouteDef]:
        # The pages and their files (gateway/web/serve.py) are served next to the socket they use.
        return [web.get("/ws", self.websocket), *serve.routes()]

    async def run(self) -> None:
        # The host's HTTP server serves the routes; this task only keeps the adapter "running".
        self.mark_connected()
        await self._stop.wait()

    async def stop(self) -> None:
        for conns in list(self.connections.values()):
            for conn in list(conns):
                await conn.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")

    async def push_state(self, user_id: str, *, resolved: tuple[Connection, UserRef] | None = None) -> None:
        """Every open client of ``user_id`` whose view of its conversation is stale gets a ``state`` frame.
        ``resolved``: a client whose person was looked up just now, and that person (not looked up again).

        Matched by the person each connection last resolved to, not by a lookup per connection: this
        runs after every turn, and looking every open client up made a turn cost O(clients) queries
        (50 a turn with 50 clients). A merge in this process moves the connections along
        (``gateway_users_merged`` below); one made elsewhere is seen at the client's next message."""
        for conns in list(self.connections.values()):
            for conn in list(conns):
                if conn.client_id and conn.user_id == user_id:
                    await conn.push_state(resolved[1] if resolved is not None and resolved[0] is conn else None)

    def users_merged(self, into: str, source: str) -> None:
        for conns in self.connections.values():
            for conn in conns:
                if conn.user_id == source:
                    conn.user_id = into

    def health(self) -> dict[str, Any]:
        return {"connections": sum(len(c) for c in self.connections.values()), **self.limits.health()}

    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """An upload named by a message frame (``POST /api/uploads``), handed over once."""
        upload = uploads(self.gateway).take(attachment.platform_id)
        if upload is None:
            raise AttachmentUnavailable(f"{attachment.name or 'the upload'} is no longer held; upload it again")
        if len(upload.data) > max_bytes:
            raise TooLarge(f"{upload.name or 'the upload'} is over the limit of {max_bytes:,} bytes")
        return upload.data

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        frame: dict[str, Any] = {"type": "reply", "id": None, "text": reply.text, "notice": reply.notice,
                                 "otr": reply.otr, "proactive": True}
        if reply.delivery_id:
            frame["delivery_id"] = reply.delivery_id  # acknowledged by the clients that do (docs/protocol.md)
        if wanted := offered(reply):  # a host question (an approval): the web chat shows it as a card
            frame["buttons"] = [{"label": b.label, "command": b.command} for b in wanted]
        delivered = acking = 0
        for conn in list(self.connections.get(address.conversation_id, ())):
            if await conn.send(frame):
                delivered += 1
                acking += conn.acks
        if not delivered:
            # The caller (a reminder job) must not mark it sent: raising makes the job retry later.
            raise LookupError(f"websocket client {address.conversation_id!r} is not connected")
        if reply.delivery_id and acking == delivered:
            expect_ack(self.gateway, reply.delivery_id)  # sent when a client acknowledges it

    # ---------------------------------------------------------------------------------- HTTP
    def _origin_ok(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:
            return True  # non-browser clients send no Origin; they still need the token if set
        # Our own origins (server.allowed_origins, loopback and public names at our port), never the
        # request's Host: on a rebound DNS name the attacker's page and its Host are the same site.
        return request.app[HTTP_POLICY].origin_allowed(origin, self.gateway.port)

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        if not self._origin_ok(request):
            log.warning("refused websocket upgrade from origin %s", request.headers.get("Origin"))
            raise web.HTTPForbidden(text="origin not allowed")
        authed = self.token is None
        header = request.headers.get("Authorization", "")
        signed_in: str | None = None
        if self.token is not None and header.startswith("Bearer "):
            if not tokens_match(header[7:], self.token):  # any header bytes: a mismatch, never a 500
                raise web.HTTPUnauthorized(text="invalid token")
            authed = True
        elif not header:
            # A browser signed in with its kith_session cookie (SameSite=Strict, and the Origin was
            # checked above): the cookie authenticates, and names the person this client is.
            who = principal_or_none(request)
            if who is not None:
                authed, signed_in = True, who.user_id
        # No cookie on loopback without a token (``kith chat``, a script, a page before its sign-in): the
        # local owner. is_local also checks the Host and that no proxy speaks for someone else.
        owner = signed_in is None and self.gateway.config.server.local_owner and is_local(self.gateway, request)
        limit = self.gateway.config.server.max_frame_bytes
        # aiohttp closes at its own limit; ours is checked per frame below so an oversize message is
        # answered (and the page keeps its draft). The hard limit only bounds what one frame may cost.
        ws = web.WebSocketResponse(max_msg_size=hard_frame_bytes(limit), heartbeat=30.0)
        await ws.prepare(request)
        conn = Connection(self, ws, authed, request.remote or "", signed_in, owner)
        auth_deadline = None if authed else asyncio.get_running_loop().time() + AUTH_TIMEOUT_S
        try:
            while True:
                timeout = None if conn.authed or auth_deadline is None else max(
                    0.0, auth_deadline - asyncio.get_running_loop().time())
                try:
                    msg = await ws.receive(timeout=timeout)
                except TimeoutError:
                    await conn.error("unauthorized", "no 'auth' frame received in time")
                    await ws.close(code=CLOSE_UNAUTHORIZED, message=b"unauthorized")
                    break
                if msg.type == WSMsgType.TEXT and len(msg.data) > limit // 4 and len(msg.data.encode()) > limit:
                    await conn.error_too_large(msg.data, limit)
                elif msg.type == WSMsgType.TEXT:
                    try:
                        frame = parse_frame(msg.data)
                    except FrameError as exc:
                        await conn.error(exc.code, str(exc))
                        continue
                    await conn.handle(frame)
                elif msg.type == WSMsgType.BINARY:
                    await conn.error("bad_frame", "binary frames are not supported; send JSON text")
                elif msg.type == WSMsgType.ERROR:
                    log.info("websocket closed with error: %s", ws.exception())
                    break
                else:  # CLOSE, CLOSING, CLOSED
                    break
        finally:
            conn.close()
            if conn.client_id:
                conns = self.connections.get(conn.client_id)
                if conns is not None:
                    conns.discard(conn)
                    if not conns:
                        del self.connections[conn.client_id]
        return ws


def _kind(mime_type: str) -> str:
    if mime_type.startswith("image/"):
        return "photo"
    return "audio" if mime_type.startswith("audio/") else "document"


@hookimpl
def gateway_register_adapters(register: AdapterRegistry) -> None:
    register(WebSocketAdapter)


@hookimpl(tryfirst=True)
async def gateway_before_tool_call(gateway: Services, turn: Turn, call: ToolCall) -> str | None:
    # The web chat shows "using a tool…" while the model waits for one (a status frame); never a veto.
    message = turn.message
    adapter = gateway.adapters.get("websocket")
    if message.channel != "websocket" or not message.message_id or not isinstance(adapter, WebSocketAdapter):
        return None
    for conn in list(adapter.connections.get(message.account_id, ())):
        if conn.current is not None and conn.current[1] == message.message_id:
            try:
                await conn.send({"type": "status", "id": conn.current[0], "state": "tool", "tool": call.name})
            except Exception:  # a status that cannot be shown must never refuse the tool (a failed veto does)
                log.debug("could not send a tool status to websocket client %s", conn.client_id, exc_info=True)
    return None


@hookimpl
def gateway_users_merged(gateway: Services, into: str, source: str) -> None:
    # A /link merged a person into another: their open clients now belong to ``into``.
    adapter = gateway.adapters.get("websocket")
    if isinstance(adapter, WebSocketAdapter):
        adapter.users_merged(into, source)


@hookimpl
async def gateway_conversation_changed(gateway: Services, user_id: str) -> None:
    # /new or /otr on another channel, a persona or settings change from the API: the person's open
    # web and terminal clients refresh what they show.
    adapter = gateway.adapters.get("websocket")
    if isinstance(adapter, WebSocketAdapter):
        await adapter.push_state(user_id)
