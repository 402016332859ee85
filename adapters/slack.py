"""Slack adapter on slack-sdk: the Web API (``AsyncWebClient``), Socket Mode (its aiohttp
``SocketModeClient``) or the Events API on the host's HTTP server, verified with ``SignatureVerifier``.

* Start: ``auth.test`` names the bot (its user id is how mentions are recognised); an ``invalid_auth``
  style answer stops only this adapter (``AdapterAuthError``). In Socket Mode the first
  ``apps.connections.open`` is ours for the same reason (the SDK would retry a revoked app token
  forever), then the SDK keeps the socket: it pings, answers ``disconnect`` by reconnecting, and
  ``run`` counts a healthy ping-pong as activity for the watchdog.
* Every envelope is acknowledged before its turn runs (Slack redelivers what is not acked in 3 s); a
  redelivered event is one turn (the host dedupes by ``<channel>:<ts>``, shared by ``message`` and
  ``app_mention`` of the same post).
* Events API: the timestamp header is checked before the body is read, the HMAC (``v0:ts:body``) on
  the raw bytes before anything is parsed, and a signature seen before within the window is a replay
  (409). ``url_verification`` is answered only once signed.
* DMs (``im``) reach the pipeline; in channels ``mentioned`` is set by ``<@bot>`` or ``app_mention``.
  In channels the answer goes to the message's thread (``reply_in_thread``). The slash command
  (``/kith link CODE``) is the way to ``/link``: Slack keeps words after ``/`` for its own commands, so
  ``/kith <command>`` runs kith's ``/<command>`` in the person's DM with the bot.
* Files: ``files`` of a message become attachments (``url_private_download``, fetched with the bot
  token, only from Slack's file host); ``send_file`` uploads with ``files_upload_v2``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

import aiohttp
from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from adapters.body import BodyTooLarge, read_body
from adapters.download import check_declared, download
from adapters.ratelimit import RateLimiter, with_retry
from adapters.slack_config import SlackConfig
from gateway.adapter import Adapter, AdapterAuthError
from gateway.delivery.buttons import PREFIX as BUTTON_PREFIX
from gateway.delivery.buttons import ButtonOffers, Offer, offered
from gateway.delivery.stream import OnDelta, StreamedReply, streamed_turn
from gateway.logs import install_redaction
from gateway.media.errors import AttachmentUnavailable
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply
from gateway.util.tasks import EventTasks
from gateway.util.text import split_text

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.slack")

AUTH_ERRORS = frozenset({"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                         "not_allowed_token_type"})  # fmt: skip
FILE_HOSTS = ("files.slack.com",)
_MAX_BODY = 256 * 1024
_TEXT_SUBTYPES = (None, "file_share", "thread_broadcast")
_CONNECT_TIMEOUT_S = 30.0


def retry_after_seconds(exc: BaseException) -> float | None:
    if isinstance(exc, SlackApiError) and getattr(exc.response, "status_code", 0) == 429:
        try:
            return float(exc.response.headers.get("Retry-After", "1"))
        except (TypeError, ValueError):
            return 1.0
    return None


def to_mrkdwn(text: str) -> str:
    """The model's Markdown in Slack's mrkdwn: ``**bold**`` -> ``*bold*``, ``[t](u)`` -> ``<u|t>``;
    ``&``, ``<`` and ``>`` escaped as Slack asks, so text never forms a mention or link by itself."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"\*\*(.+?)\*\*", r"*\1*", text)
    return re.sub(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)", r"<\2|\1>", text)


class SlackAdapter(Adapter):
    name: ClassVar[str] = "slack"
    max_message_chars: ClassVar[int] = 3900  # chat.postMessage truncates text past 40,000; 4,000 reads well

    def __init__(self, gateway: Services, config: SlackConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("slack", SlackConfig)
        super().__init__(gateway, cfg)
        self.cfg: SlackConfig = cfg
        if cfg.bot_token is None:
            raise ValueError("channels.slack.bot_token is required")
        self.stall_after_s = cfg.stall_after_s if cfg.mode == "socket" else 0.0  # type: ignore[misc]
        self.ready = asyncio.Event()
        self.bot_user_id = ""
        self._stop = asyncio.Event()
        self._web: AsyncWebClient | None = None
        self._http: aiohttp.ClientSession | None = None
        self._verifier = SignatureVerifier(cfg.signing_secret.get_secret_value()) if cfg.signing_secret else None
        self._seen: dict[str, float] = {}  # signature -> when it stops being acceptable anyway
        self._dm_of: dict[str, str] = {}  # user -> their DM channel with the bot
        self._buttons = ButtonOffers()
        self._tasks = EventTasks(log, "slack: handling an event")
        self._limiter = RateLimiter(per_key_rate=cfg.send_rate_per_s, per_key_burst=cfg.send_burst,
                                    global_rate=20, global_burst=20)  # fmt: skip
        self.stats = {"events": 0, "sent": 0, "webhook_rejected": 0, "webhook_replayed": 0, "webhook_bad_payload": 0,
                      "envelopes": 0, "streamed": 0, "buttons": 0}  # fmt: skip

    # ----------------------------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        self._stop.clear()
        secrets = [s.get_secret_value() for s in (self.cfg.bot_token, self.cfg.app_token, self.cfg.signing_secret) if s]
        install_redaction(secrets)
        bot_token = self.cfg.bot_token.get_secret_value() if self.cfg.bot_token else ""
        web_client = AsyncWebClient(token=bot_token, base_url=self.cfg.api_base)
        self._http = aiohttp.ClientSession()
        try:
            auth = await _checked(web_client.auth_test(), "auth.test with the bot token")
            self.bot_user_id = str(auth.get("user_id") or "")
            self._web = web_client
            if self.cfg.mode == "socket":
                await self._socket_mode()
            else:
                self.mark_connected()
                self.ready.set()
                await self._stop.wait()
        finally:
            self.ready.clear()
            self._web = None
            await self._tasks.cancel_all()
            await self._http.close()
            self._http = None

    async def _socket_mode(self) -> None:
        app_token = self.cfg.app_token.get_secret_value() if self.cfg.app_token else ""
        client = SocketModeClient(app_token=app_token, web_client=AsyncWebClient(base_url=self.cfg.api_base),
                                  auto_reconnect_enabled=True, logger=logging.getLogger("kith.adapters.slack.sdk"))
        try:
            opened = await _checked(client.web_client.apps_connections_open(app_token=app_token),
                                    "apps.connections.open with the app token")  # fmt: skip
            client.wss_uri = str(opened["url"])
            client.socket_mode_request_listeners.append(self._on_envelope)  # type: ignore[arg-type]
            await asyncio.wait_for(client.connect(), _CONNECT_TIMEOUT_S)
            self.mark_connected()
            self.ready.set()
            while not self._stop.is_set():
                if await client.is_connected():
                    self.touch()  # the SDK's ping-pong is healthy
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 1.0)
        finally:
            await client.close()

    async def stop(self) -> None:
        self._stop.set()

    def health(self) -> dict[str, Any]:
        return {"mode": self.cfg.mode, "bot": self.bot_user_id, **self.stats}

    # ---------------------------------------------------------------------------------- Socket Mode
    async def _on_envelope(self, client: SocketModeClient, request: SocketModeRequest) -> None:
        self.touch()
        self.stats["envelopes"] += 1
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        if request.type == "events_api" and isinstance(request.payload, dict):
            self._event_callback(request.payload)
        elif request.type == "slash_commands" and isinstance(request.payload, dict):
            self._tasks.spawn(self._slash(request.payload))
        elif request.type == "interactive" and isinstance(request.payload, dict):
            self._tasks.spawn(self._interactive(request.payload))

    # ------------------------------------------------------------------------------------ Events API
    def routes(self) -> list[web.RouteDef]:
        return [web.post(self.cfg.webhook_path, self._webhook)] if self.cfg.mode == "events" else []

    async def _webhook(self, request: web.Request) -> web.Response:
        verifier = self._verifier
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        now = time.time()
        # Cheap checks first, before a byte of the body is read.
        if verifier is None or not stamp.isdigit() or abs(now - int(stamp)) > self.cfg.timestamp_window_s \
                or not signature.startswith("v0="):  # fmt: skip
            return self._reject(request, "unsigned or outside the timestamp window")
        try:
            body = await read_body(request, _MAX_BODY)
        except (BodyTooLarge, TimeoutError) as exc:
            return self._bad(f"body refused ({exc.__class__.__name__})")
        try:
            valid = verifier.is_valid(body, stamp, signature)
        except (ValueError, UnicodeDecodeError):
            valid = False
        if not valid:
            return self._reject(request, "bad signature")
        self._forget_old(now)
        if signature in self._seen:
            self.stats["webhook_replayed"] += 1
            log.warning("slack: replayed request refused from %s", request.remote)
            return web.Response(status=409)
        self._seen[signature] = int(stamp) + self.cfg.timestamp_window_s
        self.touch()
        if request.content_type == "application/x-www-form-urlencoded":
            form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
            if "payload" in form:  # interactivity (a button pressed), signed like everything else
                try:
                    interaction = json.loads(form["payload"])
                except ValueError:
                    return self._bad("interactivity payload not JSON")
                if not isinstance(interaction, dict):
                    return self._bad("interactivity payload not an object")
                self._tasks.spawn(self._interactive(interaction))
                return web.Response(status=200)
            if "command" not in form:
                return self._bad("form without a command")
            self._tasks.spawn(self._slash(form))
            return web.Response(status=200)
        try:
            data = json.loads(body)
        except ValueError:
            return self._bad("not JSON")
        if not isinstance(data, dict):
            return self._bad("not an object")
        if data.get("type") == "url_verification":
            return web.json_response({"challenge": str(data.get("challenge", ""))})
        if data.get("type") == "event_callback":
            self._event_callback(data)
        return web.Response(status=200)

    def _forget_old(self, now: float) -> None:
        if len(self._seen) > 1000:
            self._seen = {sig: until for sig, until in self._seen.items() if until >= now}

    def _reject(self, request: web.Request, why: str) -> web.Response:
        self.stats["webhook_rejected"] += 1
        log.warning("slack: webhook request refused (%s) from %s", why, request.remote)
        return web.Response(status=401)

    def _bad(self, why: str) -> web.Response:
        self.stats["webhook_bad_payload"] += 1
        log.warning("slack: webhook payload refused: %s", why)
        return web.Response(status=400)

    # ------------------------------------------------------------------------------------- inbound
    def _event_callback(self, payload: dict[str, Any]) -> None:
        event = payload.get("event")
        if not isinstance(event, dict):
            return
        try:
            message = self.normalize(event, event_id=str(payload.get("event_id") or ""))
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("slack: event refused: %s", exc)
            return
        if message is not None:
            self.stats["events"] += 1
            self._tasks.spawn(self._turn(message))

    def normalize(self, event: dict[str, Any], *, event_id: str = "") -> InboundMessage | None:
        kind = event.get("type")
        if kind not in ("message", "app_mention") or event.get("subtype") not in _TEXT_SUBTYPES:
            return None  # edits, deletions, joins: not turns
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if event.get("bot_id") or not isinstance(user, str) or user == self.bot_user_id:
            return None
        if not isinstance(channel, str) or not isinstance(ts, str) or not channel or not ts:
            raise ValueError("event without channel or ts")
        text = event.get("text") or ""
        if not isinstance(text, str):
            raise ValueError("text is not a string")
        attachments = tuple(_attachment(f) for f in event.get("files") or () if isinstance(f, dict))
        if not text and not attachments:
            return None
        direct = event.get("channel_type") == "im" or (kind == "app_mention" and channel.startswith("D"))
        mention = f"<@{self.bot_user_id}>" if self.bot_user_id else ""
        thread = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else ""
        return InboundMessage(
            channel=self.name, account_id=user, conversation_id=channel,
            kind=ConversationKind.DM if direct else ConversationKind.GROUP,
            text=_plain(text, self.bot_user_id), message_id=f"{channel}:{ts}",
            attachments=attachments, reply_to=thread if thread != ts else "",
            mentioned=direct or kind == "app_mention" or bool(mention and mention in text),
            raw={"ts": ts, "thread_ts": thread, "team": str(event.get("team") or ""), "event_id": event_id},
        )  # fmt: skip

    async def _slash(self, form: dict[str, Any]) -> None:
        """``/kith <command> [args]``: kith's ``/<command>`` in the person's DM with the bot."""
        user, words = str(form.get("user_id") or ""), str(form.get("text") or "").strip()
        if not user or str(form.get("command")) != self.cfg.slash_command:
            return
        dm = await self._dm_channel(user)
        message = InboundMessage(
            channel=self.name, account_id=user, conversation_id=dm, kind=ConversationKind.DM,
            text="/" + (words or "help"), display_name=str(form.get("user_name") or ""),
            message_id=f"cmd:{form.get('trigger_id') or time.time_ns()}", mentioned=True,
            raw={"command": self.cfg.slash_command, "from_channel": str(form.get("channel_id") or "")},
        )  # fmt: skip
        await self._turn(message)

    async def _dm_channel(self, user: str) -> str:
        if user not in self._dm_of:
            opened = await self._require().conversations_open(users=user)
            self._dm_of[user] = str(opened["channel"]["id"])
        return self._dm_of[user]

    async def _turn(self, message: InboundMessage) -> None:
        thread = ""
        if message.kind is ConversationKind.GROUP:
            thread = str(message.raw.get("thread_ts") or (message.raw.get("ts") if self.cfg.reply_in_thread else ""))
        elif message.raw.get("thread_ts"):
            thread = str(message.raw["thread_ts"])  # a DM thread stays a thread
        stream = self._streamer(message.conversation_id, thread)

        async def turn(on_delta: OnDelta | None) -> Reply | None:
            return await self.gateway.handle_inbound(message, on_delta=on_delta)

        async def deliver(reply: Reply) -> None:
            buttons = self._offer(reply, message.conversation_id, message.account_id)
            await self._deliver(message.conversation_id, self.reply_chunks(reply), thread=thread, buttons=buttons)

        _reply, streamed = await streamed_turn(stream, turn, deliver)
        self.stats["streamed"] += streamed

    def _offer(self, reply: Reply, conversation_id: str, account_id: str | None) -> list[Offer]:
        """The buttons of a confirmation (``account_id`` None: a DM, which only its person sees)."""
        wanted = offered(reply)
        if not wanted:
            return []
        return self._buttons.offer(wanted, conversation_id=conversation_id, account_id=account_id)

    async def _interactive(self, payload: dict[str, Any]) -> None:
        """A Block Kit button pressed: one of ours, by its person, runs its command as their message."""
        if payload.get("type") != "block_actions":
            return
        actions, user, channel = payload.get("actions"), payload.get("user"), payload.get("channel")
        container = payload.get("container") if isinstance(payload.get("container"), dict) else {}
        if not (isinstance(actions, list) and actions and isinstance(actions[0], dict)
                and isinstance(user, dict) and isinstance(channel, dict)):
            return
        token, user_id, channel_id = str(actions[0].get("action_id") or ""), str(user.get("id") or ""), \
            str(channel.get("id") or "")  # fmt: skip
        if not token.startswith(BUTTON_PREFIX) or not user_id or not channel_id or user_id == self.bot_user_id:
            return
        self.touch()
        web_client = self._require()
        press = self._buttons.press(token, conversation_id=channel_id, account_id=user_id)
        if press.button is None:
            log.info("slack: button press refused (%s)", press.outcome)
            await web_client.chat_postEphemeral(channel=channel_id, user=user_id, text=press.notice)
            return
        ts = str(container.get("message_ts") or "")
        message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
        if ts:
            with contextlib.suppress(SlackApiError):  # cosmetic: the used buttons go away
                await web_client.chat_update(channel=channel_id, ts=ts, text=str(message.get("text") or ""),
                                             blocks=[b for b in message.get("blocks") or []
                                                     if isinstance(b, dict) and b.get("type") != "actions"])
        thread = str(container.get("thread_ts") or "")
        inbound = InboundMessage(
            channel=self.name, account_id=user_id, conversation_id=channel_id,
            kind=ConversationKind.DM if channel_id.startswith("D") else ConversationKind.GROUP,
            text=press.button.command, display_name=str(user.get("name") or user.get("username") or ""),
            message_id=f"button:{payload.get('trigger_id') or actions[0].get('action_ts') or time.time_ns()}",
            mentioned=True, raw={"ts": ts, "thread_ts": thread, "button": True},
        )  # fmt: skip
        self.stats["buttons"] += 1
        await self._turn(inbound)

    def _streamer(self, channel: str, thread: str) -> StreamedReply[str] | None:
        web_client = self._web
        if not self.cfg.stream or web_client is None:
            return None
        return StreamedReply(_ChannelTarget(self, web_client, channel, thread), limit=self.max_message_chars,
                             retry_after=retry_after_seconds, settings=self.cfg.stream_settings(),
                             what=f"slack {channel}")


    # --------------------------------------------------------------------------------------- media
    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        what = f"the {attachment.kind} {attachment.name!r}" if attachment.name else f"the {attachment.kind}"
        check_declared(attachment.size, max_bytes, what)
        url = attachment.url
        parts = urlsplit(url)
        api = urlsplit(self.cfg.api_base)
        # The bot token goes only to Slack's file host (or the configured API's own origin, in tests).
        if not (parts.scheme == "https" and parts.hostname in FILE_HOSTS) and \
                (parts.scheme, parts.netloc) != (api.scheme, api.netloc):  # fmt: skip
            raise AttachmentUnavailable(f"{what} is not on Slack's file host")
        http = self._http
        if http is None:
            raise AttachmentUnavailable(f"Slack is not connected right now, so {what} cannot be fetched")
        token = self.cfg.bot_token.get_secret_value() if self.cfg.bot_token else ""
        return await download(http, url, max_bytes=max_bytes, what=what, headers={"Authorization": f"Bearer {token}"})

    async def send_file(self, address: ConversationAddress, *, name: str, mime_type: str, data: bytes) -> str:
        """Upload ``data`` into the conversation (``files_upload_v2``); the file id."""
        web_client = self._require()
        try:
            done = await web_client.files_upload_v2(channel=address.conversation_id, content=data, filename=name,
                                                    title=name)  # fmt: skip
        except SlackApiError as exc:
            raise AttachmentUnavailable(f"Slack refused {name!r} ({exc.response.get('error')})") from None
        return str(done["file"]["id"])

    # ------------------------------------------------------------------------------------ outbound
    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        # In a DM only its person sees (and can press) the buttons; a channel gets none outside a turn.
        buttons = self._offer(reply, address.conversation_id, None) if address.kind is ConversationKind.DM else []
        await self._deliver(address.conversation_id, self.reply_chunks(reply), buttons=buttons)

    async def _deliver(self, channel: str, chunks: list[str], *, thread: str = "",
                       buttons: list[Offer] | None = None) -> None:
        web_client = self._require()
        for i, chunk in enumerate(chunks):
            await self._limiter.acquire(channel)
            args: dict[str, Any] = {"channel": channel, "text": to_mrkdwn(chunk)}
            if buttons and i == len(chunks) - 1:
                args["blocks"] = _blocks(args["text"], buttons)
            if thread:
                args["thread_ts"] = thread
            await with_retry(lambda args=args: web_client.chat_postMessage(**args),  # type: ignore[misc]
                             retry_after=retry_after_seconds, what="slack chat.postMessage")
            self.stats["sent"] += 1

    def _require(self) -> AsyncWebClient:
        if self._web is None:
            raise RuntimeError("slack adapter is not connected")
        return self._web


def _blocks(mrkdwn: str, buttons: list[Offer]) -> list[dict[str, Any]]:
    """The message as Block Kit: its text (the ``text`` argument becomes the notification's), then the
    buttons, whose ``action_id`` is the offer's token. A section holds 3,000 characters at most."""
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": part}}
                                    for part in split_text(mrkdwn, 3000)]
    blocks.append({"type": "actions", "block_id": "kith_confirm", "elements": [
        {"type": "button", "text": {"type": "plain_text", "text": o.button.label}, "action_id": o.token,
         "value": "press", **({"style": "primary"} if i == 0 else {})} for i, o in enumerate(buttons)]})
    return blocks


class _ChannelTarget:
    """A conversation a reply streams into (``gateway.delivery.stream.MessageTarget``): ``chat.postMessage``
    (in the thread, if any), then ``chat.update`` of it, ``chat.delete`` for a surplus one. Handles are
    message timestamps (``ts``)."""

    drafts = False

    def __init__(self, adapter: SlackAdapter, web_client: AsyncWebClient, channel: str, thread: str) -> None:
        self._adapter, self._web, self._channel, self._thread = adapter, web_client, channel, thread

    async def post(self, text: str) -> str:
        await self._adapter._limiter.acquire(self._channel)
        args: dict[str, Any] = {"channel": self._channel, "text": to_mrkdwn(text)}
        if self._thread:
            args["thread_ts"] = self._thread
        posted = await self._web.chat_postMessage(**args)
        self._adapter.stats["sent"] += 1
        return str(posted["ts"])

    async def edit(self, handle: str, text: str) -> None:
        await self._adapter._limiter.acquire(self._channel)
        await self._web.chat_update(channel=self._channel, ts=handle, text=to_mrkdwn(text))

    async def seal(self, handle: str | None, text: str) -> str:
        return await self.post(text)  # never called: no drafts on Slack

    async def delete(self, handle: str) -> None:
        await self._adapter._limiter.acquire(self._channel)
        await self._web.chat_delete(channel=self._channel, ts=handle)


async def _checked(call: Any, what: str) -> Any:
    """``call``'s answer; a token Slack refuses stops the adapter instead of being retried."""
    try:
        return await call
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else None
        if error in AUTH_ERRORS:
            raise AdapterAuthError(f"slack: {what} was refused ({error})") from None
        raise


def _attachment(item: dict[str, Any]) -> Attachment:
    mime = str(item.get("mimetype") or "")
    top = mime.split("/", 1)[0]
    kind = {"image": "photo", "audio": "audio", "video": "video"}.get(top, "document")
    if item.get("subtype") == "slack_audio":
        kind = "voice"
    size = item.get("size")
    return Attachment(kind=kind, name=str(item.get("name") or "")[:255], mime_type=mime,
                      size=size if isinstance(size, int) and size >= 0 else 0, platform_id=str(item.get("id") or ""),
                      url=str(item.get("url_private_download") or item.get("url_private") or ""))  # fmt: skip


def _plain(text: str, bot_user_id: str) -> str:
    """Slack's markup in a message as a person reads it: ``<@bot>`` dropped, entities unescaped."""
    if bot_user_id:
        text = text.replace(f"<@{bot_user_id}>", "").strip()
    text = re.sub(r"<(https?://[^|>]+)\|([^>]+)>", r"\2 (\1)", text)
    text = re.sub(r"<(https?://[^>]+)>", r"\1", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
