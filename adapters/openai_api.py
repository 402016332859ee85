"""The OpenAI-compatible endpoint: kith as a chat-completions server (``/v1``, docs/openai-api.md).

A channel adapter like any other (channel ``openai``), so a request is a turn through
``gateway.handle_inbound`` and every memory stage applies exactly as on Telegram or the web chat. What
is particular to it:

* **Who.** ``Authorization: Bearer <API key>``, a per-person key made by ``kith users api-key USER``
  (``gateway/http/api_keys.py``), on loopback too: a key is the only credential ``/v1`` takes (never the
  operator token, never a sign-in cookie). The HTTP guard (Host, Origin, proxies, JSON bodies) runs
  first, as on every route.
* **What.** Clients send the whole conversation every time; kith keeps the history itself, so only the
  newest user message is the turn; earlier messages and a client's system prompt are not read.
* **Which conversation.** ``X-Kith-Conversation`` (else Open WebUI's ``X-OpenWebUI-Chat-Id``, else
  OpenAI's ``user`` field) names one of the key's
  conversations, else the key has one default conversation. The conversation carries the persona,
  which the request's ``model`` picks (``GET /v1/models`` lists the person's personas). The session is
  the person's own, as on every direct channel: one live session per person, across channels.
* **Limits.** ``server.rate_limit`` per person and for everyone, and its cap on turns running at once:
  429 with OpenAI's error object, never a queue.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aiohttp import web

from adapters.openai_wire import (
    ChatRequest,
    WireError,
    chunk,
    completion,
    conversation_name,
    inline_bytes,
    model_entry,
    parse_chat,
    sse,
    unauthorized,
    usage_chunk,
    usage_of,
)
from adapters.ws_limits import WebSocketLimits
from gateway.adapter import Adapter, AdapterRegistry
from gateway.hookspecs import hookimpl
from gateway.http.api_keys import CHANNEL, authenticate, ensure_account
from gateway.http.auth import bearer
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.personas import PersonaError
from gateway.personas.choice import available, choose, on_disk, persona_for
from gateway.turn.budget import estimate_tokens
from gateway.types import (
    Attachment,
    ConversationAddress,
    ConversationKind,
    InboundMessage,
    LLMResponse,
    Reply,
    StashKey,
    Turn,
)

if TYPE_CHECKING:
    from gateway.services import Services
    from gateway.state import ApiKey

log = logging.getLogger("kith.adapters.openai")

CONVERSATION_HEADER = "X-Kith-Conversation"
# Open WebUI names its chat here when it forwards user info (ENABLE_FORWARD_USER_INFO_HEADERS).
OPEN_WEBUI_CHAT_HEADER = "X-OpenWebUI-Chat-Id"
TOUCH_EVERY = timedelta(minutes=5)  # a key's last use is written at most this often
# Token counts of the model calls of a turn, by turn id, until the request that made the turn reads them.
USAGE: StashKey[dict[str, tuple[int, int]]] = StashKey()
MAX_PENDING_USAGE = 1000


class OpenAIAdapter(Adapter):
    name = CHANNEL
    max_message_chars = 1_000_000  # one answer carries the whole reply; never split

    def __init__(self, gateway: Services, config: Any = None) -> None:
        super().__init__(gateway, config)
        self.limits = WebSocketLimits(gateway.config.server.rate_limit)
        self._touched: dict[str, datetime] = {}
        self._stop = asyncio.Event()

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self.chat_completions), web.get("/v1/models", self.models),
                web.get("/v1/models/{model}", self.model)]  # fmt: skip

    async def run(self) -> None:
        # The host's HTTP server serves the routes; this task only keeps the adapter "running".
        self.mark_connected()
        await self._stop.wait()

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        # A client reaches kith, never the other way round: a proactive message goes to another channel.
        raise LookupError("the openai channel answers requests only; it cannot reach a client on its own")

    def health(self) -> dict[str, Any]:
        return self.limits.health()

    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        # The request carried the file inline (a data: URL); nothing is downloaded.
        data = inline_bytes(attachment.url, max_bytes)
        if data is None:
            raise AttachmentUnavailable(f"{attachment.name or 'a file'} is not valid base64 data")
        if len(data) > max_bytes:
            raise TooLarge(f"{attachment.name or 'a file'} is over the limit of {max_bytes:,} bytes")
        return data

    # ---------------------------------------------------------------------------------- auth
    def _key(self, request: web.Request) -> ApiKey:
        given = bearer(request)
        if given is None:
            raise unauthorized("send a kith API key: Authorization: Bearer <key> (`kith users api-key USER` "
                               "makes one; docs/openai-api.md)")  # fmt: skip
        found = authenticate(self.gateway.state, given)
        if found is None:
            raise unauthorized("invalid or revoked API key")
        now = datetime.now(UTC)
        if now - self._touched.get(found.key_id, datetime.min.replace(tzinfo=UTC)) > TOUCH_EVERY:
            if len(self._touched) > 10_000:
                self._touched.clear()
            self._touched[found.key_id] = now
            self.gateway.state.api_keys.touch(found.key_id, now)
        return found

    def _personas(self, user_id: str) -> list[str]:
        """The personas ``user_id`` may talk to that exist: the models of ``/v1/models``."""
        exists = {*on_disk(self.gateway.data_dir), *self.gateway.config.personas.names()}
        return [n for n in available(self.gateway, user_id) if n in exists]

    # -------------------------------------------------------------------------------- models
    async def models(self, request: web.Request) -> web.Response:
        try:
            key = self._key(request)
        except WireError as exc:
            return exc.response()
        return web.json_response({"object": "list", "data": [model_entry(n) for n in self._personas(key.user_id)]})

    async def model(self, request: web.Request) -> web.Response:
        try:
            key = self._key(request)
            name = request.match_info["model"]
            if name not in self._personas(key.user_id):
                raise _no_model(name)
        except WireError as exc:
            return exc.response()
        return web.json_response(model_entry(name))

    # ------------------------------------------------------------------------ chat completions
    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            key = self._key(request)
            req = parse_chat(await _json(request))
            name = conversation_name(request.headers.get(CONVERSATION_HEADER)
                                     or request.headers.get(OPEN_WEBUI_CHAT_HEADER), req.user)  # fmt: skip
            if req.model not in self._personas(key.user_id):
                raise _no_model(req.model)
            message = self._message(key, req, name)
            refusal = self.limits.message(key.user_id)
            if refusal is not None:
                raise WireError(429, refusal, code="rate_limit_exceeded", headers={"Retry-After": "10"})
        except WireError as exc:
            return exc.response()
        with self.limits.turn() as slot:
            if not slot:
                return WireError(429, f"the server is answering {self.limits.max_turns} messages already; try "
                                 "again in a moment", code="rate_limit_exceeded",
                                 headers={"Retry-After": "2"}).response()  # fmt: skip
            # Only a request that runs a turn changes the conversation's persona (never a refused one).
            try:
                switched = self._choose_persona(key.user_id, message.conversation_key, req.model)
            except WireError as exc:
                return exc.response()
            if req.stream:
                response = await self._stream(request, message, req)
            else:
                response = await self._complete(message, req)
        if switched:
            # The turn started a session with the new persona: the person's other clients show it.
            await self.gateway.hooks.conversation_changed(self.gateway, user_id=key.user_id)
        return response

    def _message(self, key: ApiKey, req: ChatRequest, name: str) -> InboundMessage:
        state = self.gateway.state
        user = state.users.get(key.user_id)
        if user is None:  # deleted between the key check and now
            raise unauthorized("invalid or revoked API key")
        with state.tx():
            ensure_account(state, key.user_id, display_name=user.display_name)  # a merge moved it elsewhere
        # Conversations are named per key: two keys (two apps) never share one by accident.
        conversation = f"{key.key_id}:{name}" if name else key.key_id
        return InboundMessage(channel=CHANNEL, account_id=key.user_id, conversation_id=conversation, text=req.text,
                              attachments=req.attachments, kind=ConversationKind.DM, display_name=user.display_name,
                              message_id=uuid.uuid4().hex, timestamp=datetime.now(UTC), trusted=True)  # fmt: skip

    def _choose_persona(self, user_id: str, conversation_key: str, model: str) -> bool:
        """Make ``model`` the persona of the conversation; True when that changed it."""
        if model not in self._personas(user_id):
            raise _no_model(model)
        if persona_for(self.gateway, user_id, conversation_key) == model:
            return False
        try:
            choose(self.gateway, user_id, model, conversation_key=conversation_key)
        except PersonaError as exc:
            raise WireError(404, str(exc), param="model", code="model_not_found") from None
        return True

    async def _complete(self, message: InboundMessage, req: ChatRequest) -> web.Response:
        reply = await self.gateway.handle_inbound(message)
        text = reply.text if reply is not None else ""
        cid = "chatcmpl-" + (reply.turn_id if reply is not None and reply.turn_id else uuid.uuid4().hex)
        body = completion(cid, req.model, text, self._usage(reply, message.text, text))
        return web.json_response(body, headers=_session_headers(reply))

    async def _stream(self, request: web.Request, message: InboundMessage, req: ChatRequest) -> web.StreamResponse:
        created = int(time.time())
        cid = "chatcmpl-" + uuid.uuid4().hex
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no"})  # fmt: skip
        await response.prepare(request)
        out = _Events(response)
        await out.send(chunk(cid, req.model, created, {"role": "assistant", "content": ""}, usage=req.include_usage))
        streamed: list[str] = []

        async def on_delta(piece: str) -> None:
            if piece:
                streamed.append(piece)
                await out.send(chunk(cid, req.model, created, {"content": piece}, usage=req.include_usage))

        try:
            reply = await self.gateway.handle_inbound(message, on_delta=on_delta)
        except Exception:
            log.exception("openai: turn failed")
            await out.send({"error": {"message": "the message could not be processed", "type": "server_error",
                                      "param": None, "code": None}})  # fmt: skip
            await out.send("[DONE]")
            return response
        text = reply.text if reply is not None else ""
        sent = "".join(streamed)
        # A command's answer, a notice or a reply rendered differently than it streamed: what was not
        # streamed yet follows as one more piece (a reply never streamed at all is that piece).
        rest = text[len(sent):] if text.startswith(sent) else ("" if sent else text)
        if rest:
            await out.send(chunk(cid, req.model, created, {"content": rest}, usage=req.include_usage))
        await out.send(chunk(cid, req.model, created, {}, "stop", usage=req.include_usage))
        if req.include_usage:
            await out.send(usage_chunk(cid, req.model, created, self._usage(reply, message.text, text)))
        await out.send("[DONE]")
        if not out.gone:
            await response.write_eof()
        return response

    def _usage(self, reply: Reply | None, prompt_text: str, text: str) -> dict[str, int]:
        """The turn's tokens as the model reported them; estimated when no model call was made or reported
        (a command, an Off-The-Record turn, whose after-turn hook never runs)."""
        counted = usage_table(self.gateway).pop(reply.turn_id, None) if reply is not None and reply.turn_id else None
        if counted is not None:
            return usage_of(*counted)
        return usage_of(estimate_tokens(prompt_text), estimate_tokens(text))


class _Events:
    """Server-sent events to a client that may leave mid-answer: the turn still finishes and is stored,
    as when a web chat tab closes (its reply is in the history next time); writes stop at once."""

    def __init__(self, response: web.StreamResponse) -> None:
        self.response = response
        self.gone = False

    async def send(self, data: dict[str, Any] | str) -> None:
        if self.gone:
            return
        try:
            await self.response.write(sse(data))
        except ConnectionError:
            self.gone = True


def _no_model(name: str) -> WireError:
    return WireError(404, f"the model {name!r} does not exist: models are your personas (GET /v1/models)",
                     param="model", code="model_not_found")  # fmt: skip


def _session_headers(reply: Reply | None) -> dict[str, str]:
    return {"X-Kith-Session": reply.session_id} if reply is not None and reply.session_id else {}


async def _json(request: web.Request) -> Any:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise WireError(413, "the request body is too large (1 MiB at most); kith reads only the newest user "
                        "message, so a client may send less history") from None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise WireError(400, "the body is not valid JSON") from None


def usage_table(gateway: Services) -> dict[str, tuple[int, int]]:
    return gateway.stash.setdefault(USAGE, {})


@hookimpl
def gateway_register_adapters(register: AdapterRegistry) -> None:
    register(OpenAIAdapter)


@hookimpl
def gateway_after_turn(gateway: Services, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
    # The tokens of a /v1 turn, for the answer's ``usage``; read (and dropped) by the request at once.
    if turn.message.channel != CHANNEL or response is None:
        return
    table = usage_table(gateway)
    if len(table) >= MAX_PENDING_USAGE:  # answers whose request left before reading them
        table.clear()
    table[turn.turn_id] = (response.input_tokens, response.output_tokens)
