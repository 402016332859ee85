"""Telegram adapter on python-telegram-bot 22, with the host owning the event loop.

Never run this file as a script (it would shadow the ``telegram`` package); import it absolutely.

* Polling: ``Application.initialize/start`` + ``updater.start_polling`` (never ``run_polling``).
  Every Bot API answer to ``getUpdates`` calls ``touch()``; a poll that stops coming back is seen by
  the supervisor's watchdog (``stall_after_s``) and the adapter is restarted.
* Webhook: the route lives on the host's aiohttp app. It refuses to start without a secret, and a
  request whose ``X-Telegram-Bot-Api-Secret-Token`` does not match (constant-time) is refused before
  its body is read.
* A 401 from the Bot API (revoked token) raises ``AdapterAuthError``: only this adapter stops.
* Private chats always reach the pipeline; in groups ``mentioned`` is set when the bot is @mentioned,
  addressed by ``/cmd@bot`` or replied to (the access policy does the gating).
* Replies: Markdown from the model rendered as Telegram HTML chunk by chunk (plain text if Telegram
  cannot parse it), split at 4096, paced per chat, ``RetryAfter`` honoured, typing while the turn runs.
  A reply to a voice note is also spoken (``voice_replies``, gateway/media/tts.py): ``sendVoice`` with
  the Ogg/Opus and its duration, after the text, which never waits on it or depends on it.
* Media: a photo (its largest size), document, voice note, audio, video, video note or sticker becomes
  an ``Attachment`` (``platform_id`` = file_id); a caption-less one is a turn with empty text. The
  parts of an album (one message per item, same ``media_group_id``) are merged into one turn.
  ``fetch_attachment`` asks ``getFile`` for the path and downloads ``/file/bot<token>/<path>`` with a
  cap; the Bot API hands bots files up to 20 MB only, so anything larger is refused up front.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

import aiohttp
from aiohttp import web
from telegram import (
    BotCommand,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    PhotoSize,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, EndPointNotFound, InvalidToken, RetryAfter, TelegramError
from telegram.ext import Application, ContextTypes, TypeHandler
from telegram.request import HTTPXRequest

from adapters._split import markdown_to_telegram_html
from adapters.body import BodyTooLarge, read_body
from adapters.download import check_declared, download, mib
from adapters.ratelimit import RateLimiter, with_retry
from adapters.telegram_config import TelegramConfig
from gateway.adapter import Adapter, AdapterAuthError
from gateway.delivery.buttons import PREFIX as BUTTON_PREFIX
from gateway.delivery.buttons import ButtonOffers, offered
from gateway.delivery.stream import OnDelta, StreamedReply, streamed_turn
from gateway.logs import install_redaction
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.media.tts import voice_reply
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply
from gateway.util.tasks import while_showing
from gateway.util.tls import client_context

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.telegram")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
ALLOWED_UPDATES = ["message", "callback_query"]  # messages, and presses of our confirmation buttons
_MAX_UPDATE_BYTES = 256 * 1024  # real updates are a few KB; a 4096-char text is ~16 KB of JSON
_TYPING_DELAY_S = 0.8  # dropped messages (strangers) finish before this and never show typing
_TYPING_EVERY_S = 4.5  # Telegram shows "typing" for ~5 s per sendChatAction
_FILE_FIELDS = ("voice", "audio", "video", "video_note", "document", "sticker")  # besides ``photo``
_ALBUM_GAP_S = 0.8  # album parts come in one getUpdates batch or webhook burst, well within this
_ALBUM_MAX_PARTS = 10  # Telegram albums hold 2-10 items
TOOL_STATUS = "Looking that up…"
BOT_API_DOWNLOAD_LIMIT = 20 * 1024 * 1024  # getFile refuses bigger files ("file is too big")
# Telegram sends photos, voice notes and video notes without a file name; one is made from the kind
# and file_unique_id (stable across bots and time) so a stored copy has a meaningful, unique name.
_DEFAULT_NAMES = {"photo": ("photo", ".jpg", "image/jpeg"), "voice": ("voice", ".ogg", "audio/ogg"),
                  "video_note": ("video_note", ".mp4", "video/mp4"), "sticker": ("sticker", ".webp", "image/webp")}
# Answered by the core (gateway/turn/commands.py); listed here only for Telegram's command menu.
BOT_COMMANDS = (
    ("start", "introduction and help"),
    ("help", "what I can do"),
    ("new", "start a fresh session"),
    ("otr", "Off-The-Record on|off"),
    ("link", "connect another account of yours"),
)


def retry_after_seconds(exc: BaseException) -> float | None:
    if not isinstance(exc, RetryAfter):
        return None
    value = getattr(exc, "_retry_after", None)  # timedelta in PTB 22; avoids the int deprecation path
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) if isinstance(value, int | float) else 1.0


class _WatchedRequest(HTTPXRequest):
    """HTTPX transport that reports Bot API answers to the adapter: activity and revoked tokens."""

    def __init__(self, adapter: TelegramAdapter, *, polling: bool, **kwargs: Any) -> None:
        # The process's one TLS context (gateway/util/tls.py), not a new one per client and restart.
        super().__init__(httpx_kwargs={"verify": client_context()}, **kwargs)
        self._adapter = adapter
        self._polling = polling

    async def do_request(self, url: str, method: str, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        code, payload = await super().do_request(url, method, *args, **kwargs)
        if code == 401:
            self._adapter.auth_failed.set()
        elif self._polling:
            self._adapter.touch()  # a long poll came back: the poller is alive
            if code == 200 and url.endswith("/getUpdates"):
                payload = sanitize_updates(payload)
        return code, payload


def sanitize_updates(payload: bytes) -> bytes:
    """Replace updates PTB cannot parse with empty ones carrying the same ``update_id``.

    PTB parses a getUpdates batch as a whole and, if one update is malformed, logs and drops the batch
    without confirming it, so the same bad update would come back on every poll forever. An empty
    update keeps the offset moving; the bad one costs a log line.
    """
    try:
        data = json.loads(payload)
        results = data["result"]
        if not isinstance(results, list):
            return payload
    except (ValueError, KeyError, TypeError):
        return payload  # not ours to judge: PTB reports unparseable answers itself
    changed = False
    for i, item in enumerate(results):
        update_id = item.get("update_id") if isinstance(item, dict) else None
        try:
            if not isinstance(update_id, int):
                raise TypeError("update_id missing or not an integer")
            Update.de_json(item, None)
        except Exception as exc:
            log.warning("telegram: update %s refused: %s", update_id, exc.__class__.__name__)
            results[i] = {"update_id": update_id if isinstance(update_id, int) else 0}
            changed = True
    if not changed:
        return payload
    results[:] = [r for r in results if r["update_id"]]
    return json.dumps(data).encode()


class TelegramAdapter(Adapter):
    name: ClassVar[str] = "telegram"
    max_message_chars: ClassVar[int] = 4096

    def __init__(self, gateway: Services, config: TelegramConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("telegram", TelegramConfig)
        super().__init__(gateway, cfg)
        self.cfg: TelegramConfig = cfg
        if cfg.token is None:
            raise ValueError("channels.telegram.token is required")
        self.stall_after_s = cfg.stall_after_s  # type: ignore[misc]  # per-instance, from config
        self.auth_failed = asyncio.Event()
        self.ready = asyncio.Event()  # set while connected (tests and health wait on it)
        self._stop = asyncio.Event()
        self._app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._bot_id = 0
        self._bot_username = ""
        self._limiter = RateLimiter(
            per_key_rate=cfg.send_rate_per_s, per_key_burst=cfg.send_burst, global_rate=30, global_burst=30
        )
        self.stats = {"updates": 0, "webhook_rejected": 0, "webhook_bad_payload": 0, "sent": 0, "streamed": 0,
                      "buttons": 0, "voice": 0}
        self._albums: dict[str, list[InboundMessage]] = {}
        self._drafts_ok = True
        self._buttons = ButtonOffers()
        self._draft_ids = itertools.count(1)
        self._album_arrived: dict[str, asyncio.Event] = {}
        # inbound message id -> its turn's "looking that up…" message: 0 none yet, -1 being sent
        self._statuses: dict[str, int] = {}

    # ----------------------------------------------------------------------------------- lifecycle
    def _build(self) -> Application[Any, Any, Any, Any, Any, Any]:
        token = self.cfg.token.get_secret_value() if self.cfg.token else ""
        builder = (
            Application.builder()
            .token(token)
            .request(_WatchedRequest(self, polling=False, connection_pool_size=16, read_timeout=15))
            .get_updates_request(_WatchedRequest(self, polling=True, read_timeout=10, connect_timeout=5))
            .concurrent_updates(32)
        )
        if self.cfg.base_url:
            base = self.cfg.base_url.rstrip("/")
            builder = builder.base_url(base + "/bot{token}").base_file_url(base + "/file/bot{token}")
        if self.cfg.mode == "webhook":
            builder = builder.updater(None)
        app = builder.build()
        app.add_handler(TypeHandler(Update, self._on_update))
        install_redaction([token])  # PTB and httpx print Bot API URLs, which carry the token
        return app

    async def run(self) -> None:
        if self.cfg.mode == "webhook" and self.cfg.webhook_secret is None:
            raise AdapterAuthError("telegram webhook mode refuses to start without channels.telegram.webhook_secret")
        self.auth_failed.clear()
        self._stop.clear()
        app = self._build()
        try:
            try:
                await app.initialize()  # getMe: a bad token fails here
            except InvalidToken:
                raise AdapterAuthError("telegram rejected the bot token (getMe answered 401)") from None
            self._bot_id, self._bot_username = app.bot.id, (app.bot.username or "").lower()
            await self._publish_commands(app)
            await app.start()
            self._app = app
            if self.cfg.mode == "polling":
                assert app.updater is not None
                await app.updater.start_polling(
                    timeout=self.cfg.poll_timeout_s,
                    allowed_updates=ALLOWED_UPDATES,
                    error_callback=self._poll_error,
                )
            elif self.cfg.webhook_url:
                await app.bot.set_webhook(
                    self.cfg.webhook_url,
                    secret_token=self.cfg.webhook_secret.get_secret_value() if self.cfg.webhook_secret else None,
                    allowed_updates=ALLOWED_UPDATES,
                )
            self.mark_connected()
            self.ready.set()
            log.info("telegram: @%s connected (%s)", self._bot_username, self.cfg.mode)
            stop = asyncio.create_task(self._stop.wait())
            auth = asyncio.create_task(self.auth_failed.wait())
            try:
                await asyncio.wait({stop, auth}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                auth.cancel()
            if self.auth_failed.is_set():
                raise AdapterAuthError("telegram token rejected by the Bot API (401): revoked or wrong token")
        finally:
            self.ready.clear()
            self._app = None
            await self._shutdown(app)

    @staticmethod
    async def _publish_commands(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        """Show the core's commands in Telegram's menu; cosmetic, so a failure is only logged."""
        try:
            await app.bot.set_my_commands([BotCommand(name, text) for name, text in BOT_COMMANDS])
        except TelegramError as exc:
            log.info("telegram: setMyCommands failed (%s); commands still work when typed", exc.__class__.__name__)

    @staticmethod
    def _poll_error(exc: TelegramError) -> None:
        log.warning("telegram: polling error: %s", exc.__class__.__name__)

    async def _shutdown(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        # Each step bounded: a stalled Bot API must not hang a restart (updater.stop polls once more).
        steps = []
        if app.updater is not None and app.updater.running:
            steps.append(("updater.stop", app.updater.stop))
        if app.running:
            steps.append(("stop", app.stop))
        steps.append(("shutdown", app.shutdown))
        for label, step in steps:
            try:
                await asyncio.wait_for(asyncio.shield(step()), timeout=3)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("telegram: %s during shutdown failed: %s", label, exc.__class__.__name__)

    async def stop(self) -> None:
        self._stop.set()

    def health(self) -> dict[str, Any]:
        return {"mode": self.cfg.mode, "bot": self._bot_username, **self.stats}

    def next_draft_id(self) -> int:
        return next(self._draft_ids)

    # ------------------------------------------------------------------------------------- webhook
    def routes(self) -> list[web.RouteDef]:
        if self.cfg.mode != "webhook":
            return []
        return [web.post(self.cfg.webhook_path, self._webhook)]

    async def _webhook(self, request: web.Request) -> web.Response:
        expected = self.cfg.webhook_secret.get_secret_value() if self.cfg.webhook_secret else ""
        got = request.headers.get(SECRET_HEADER, "")
        # Checked before the body is read; compare_digest on bytes so any header value is comparable.
        if not expected or not hmac.compare_digest(got.encode("utf-8", "replace"), expected.encode()):
            self.stats["webhook_rejected"] += 1
            log.warning("telegram: webhook request without the right secret token from %s", request.remote)
            return web.Response(status=401)
        app = self._app
        if app is None:
            return web.Response(status=503)  # not started yet: Telegram retries later
        try:
            body = await read_body(request, _MAX_UPDATE_BYTES)
        except BodyTooLarge as exc:
            return self._bad(f"body too large ({exc})")
        except TimeoutError:
            return self._bad("body not complete in time")
        try:
            data = json.loads(body)
            if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
                return self._bad("not an update object")
            update = Update.de_json(data, app.bot)
        except Exception as exc:  # PTB raises assorted errors on malformed nested objects
            return self._bad(f"unparseable update ({exc.__class__.__name__})")
        self.touch()
        await app.update_queue.put(update)
        return web.Response(status=200)

    def _bad(self, why: str) -> web.Response:
        self.stats["webhook_bad_payload"] += 1
        log.warning("telegram: webhook payload refused: %s", why)
        return web.Response(status=400)

    # ------------------------------------------------------------------------------------- inbound
    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.callback_query is not None:
            try:
                await self._on_button(update.callback_query)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("telegram: button press %s failed", update.callback_query.id)
            return
        try:
            message = self.normalize(update)
        except Exception as exc:
            log.warning("telegram: update %s refused: %s", update.update_id, exc)
            return
        if message is None:
            return
        self.stats["updates"] += 1
        group = update.message.media_group_id if update.message is not None else None
        if group:
            merged = await self._album(f"{message.conversation_id}:{group}", message)
            if merged is None:
                return  # a later part of an album: the first part's handler takes the turn
            message = merged
        try:
            native = update.message
            await self._turn(message, native.message_id if native is not None else None)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("telegram: turn for %s failed", message.message_id)

    async def _album(self, key: str, message: InboundMessage) -> InboundMessage | None:
        """Collect the parts of an album (one message per photo, the caption on one of them) into one
        turn: the first part waits until no part came for ``_ALBUM_GAP_S``; later parts join it."""
        album = self._albums.get(key)
        if album is not None:
            album.append(message)
            self._album_arrived[key].set()
            return None
        self._albums[key] = parts = [message]
        arrived = self._album_arrived[key] = asyncio.Event()
        try:
            while len(parts) < _ALBUM_MAX_PARTS:
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), _ALBUM_GAP_S)
                except TimeoutError:
                    break
        finally:
            self._albums.pop(key, None)
            self._album_arrived.pop(key, None)
        return merge_album(parts)

    def normalize(self, update: Update) -> InboundMessage | None:
        msg = update.message
        if msg is None:
            return None  # edits, channel posts, callbacks: not conversation turns
        user, chat = msg.from_user, msg.chat
        if user is None or user.is_bot or chat is None:
            return None
        text = msg.text if msg.text is not None else (msg.caption or "")
        if not isinstance(text, str):
            raise ValueError("text is not a string")
        if len(text) > self.max_message_chars:
            raise ValueError(f"text of {len(text)} characters is over the platform limit")
        attachments = self._attachments(msg)
        if not text and not attachments:
            return None
        private = chat.type == "private"
        return InboundMessage(
            channel=self.name,
            account_id=str(int(user.id)),
            display_name=user.full_name or "",
            conversation_id=str(int(chat.id)),
            kind=ConversationKind.DM if private else ConversationKind.GROUP,
            text=text,
            message_id=f"{int(chat.id)}:{int(msg.message_id)}",
            timestamp=msg.date,
            attachments=attachments,
            mentioned=private or self._addressed(msg, text),
            reply_to=str(msg.reply_to_message.message_id) if msg.reply_to_message else "",
            raw={"update_id": update.update_id, "chat_type": chat.type, "username": user.username or "",
                 # file_unique_id per attachment, in order: the same file sent again has the same one
                 "file_unique_ids": _unique_ids(msg)},
        )

    def _addressed(self, msg: Message, text: str) -> bool:
        reply = msg.reply_to_message
        if reply is not None and reply.from_user is not None and reply.from_user.id == self._bot_id:
            return True
        handle = f"@{self._bot_username}" if self._bot_username else ""
        for entity in (msg.entities or ()) + (msg.caption_entities or ()):
            if entity.type == "text_mention" and entity.user is not None and entity.user.id == self._bot_id:
                return True
            if entity.type in ("mention", "bot_command") and handle:
                value = text[entity.offset : entity.offset + entity.length].lower()
                if value == handle or value.endswith(handle):
                    return True
        return bool(handle) and handle in text.lower()

    @staticmethod
    def _attachments(msg: Message) -> tuple[Attachment, ...]:
        items: list[tuple[str, Any]] = []
        if msg.photo:
            # Telegram sends every size it made; the largest is the original (within its 2560px cap).
            items.append(("photo", _largest(msg.photo)))
        for kind in _FILE_FIELDS:
            item = getattr(msg, kind, None)
            if item is not None:  # a GIF comes as ``animation`` and ``document``: one file, taken once
                items.append((kind, item))
        return tuple(_attachment(kind, item) for kind, item in items)

    async def _turn(self, message: InboundMessage, question_id: int | None) -> None:
        chat_id = int(message.conversation_id)
        reply_to = question_id if message.kind is ConversationKind.GROUP else None
        stream = self._streamer(chat_id, reply_to, private=message.raw.get("chat_type") == "private")
        self._statuses[message.message_id] = 0

        async def turn(on_delta: OnDelta | None) -> Reply | None:
            try:
                return await while_showing(self._typing(chat_id),
                                           self.gateway.handle_inbound(message, on_delta=on_delta))
            finally:
                await self._clear_status(chat_id, self._statuses.pop(message.message_id, 0))

        async def deliver(reply: Reply) -> None:
            buttons = self._offer(reply, message.conversation_id, message.account_id)
            await self._deliver(chat_id, self.reply_chunks(reply), reply_to=reply_to, buttons=buttons)

        reply, streamed = await streamed_turn(stream, turn, deliver)
        if reply is None:
            return
        self.stats["streamed"] += streamed
        await self._speak(chat_id, message, reply, reply_to=reply_to)

    async def show_tool_status(self, message: InboundMessage, tool: str) -> None:
        """"Looking that up…" while the turn's first tool runs (``gateway_before_tool_call``,
        adapters/builtin.py), deleted once the answer is there: Telegram has no status line and its
        typing indicator says nothing of tools, so it is a short message of its own."""
        app = self._app
        if app is None or not self.cfg.tool_status or self._statuses.get(message.message_id) != 0:
            return
        chat_id = int(message.conversation_id)
        self._statuses[message.message_id] = -1  # being sent: a second tool call shows nothing more
        await self._limiter.acquire(str(chat_id))
        sent = await app.bot.send_message(chat_id, TOOL_STATUS)
        if message.message_id in self._statuses:
            self._statuses[message.message_id] = int(sent.message_id)
        else:  # the answer came while it was being sent
            await self._clear_status(chat_id, int(sent.message_id))

    async def _clear_status(self, chat_id: int, status_id: int) -> None:
        app = self._app
        if status_id <= 0 or app is None:
            return
        try:
            await app.bot.delete_message(chat_id, status_id)
        except TelegramError as exc:
            log.info("telegram: the tool status %s stays (%s)", status_id, exc.__class__.__name__)

    async def _speak(self, chat_id: int, message: InboundMessage, reply: Reply, *, reply_to: int | None) -> None:
        """The reply as a voice note (``sendVoice``, Ogg/Opus) after its text, when ``voice_replies``
        wants one; "recording a voice message" shows while it is spoken. The text is already out: a
        voice note that cannot be made or sent is logged, nothing more (gateway/media/tts.py)."""
        speech = await while_showing(self._typing(chat_id, ChatAction.RECORD_VOICE),
                                     voice_reply(self.gateway, self.cfg.voice_replies, message, reply))
        app = self._app
        if speech is None or app is None:
            return
        params = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        data, seconds, name = speech.data, speech.seconds, speech.name
        try:
            await self._limiter.acquire(str(chat_id))
            await with_retry(lambda: app.bot.send_voice(chat_id, data, duration=seconds, filename=name,
                                                        reply_parameters=params),
                             retry_after=retry_after_seconds, what="telegram sendVoice")
        except TelegramError as exc:  # e.g. a person whose privacy settings refuse voice messages
            log.warning("telegram: sendVoice to %s failed (%s); the text was sent", chat_id, exc.__class__.__name__)
            return
        self.stats["voice"] += 1

    def _offer(self, reply: Reply, conversation_id: str, account_id: str | None) -> InlineKeyboardMarkup | None:
        """The inline keyboard of a confirmation, its buttons pressable by ``account_id`` only."""
        wanted = offered(reply)
        if not wanted or account_id is None:
            return None
        offers = self._buttons.offer(wanted, conversation_id=conversation_id, account_id=account_id)
        return InlineKeyboardMarkup([[InlineKeyboardButton(o.button.label, callback_data=o.token) for o in offers]])

    async def _on_button(self, query: CallbackQuery) -> None:
        """A press of an inline button: one of ours, by its person, runs its command as their message."""
        self.touch()
        msg, user = query.message, query.from_user
        chat = msg.chat if msg is not None else None
        data = query.data or ""
        if chat is None or user is None or user.is_bot or not data.startswith(BUTTON_PREFIX):
            await query.answer()
            return
        press = self._buttons.press(data, conversation_id=str(int(chat.id)), account_id=str(int(user.id)))
        if press.button is None:
            log.info("telegram: button press refused (%s)", press.outcome)
            await query.answer(press.notice, show_alert=True)
            return
        await query.answer()
        app = self._app
        if app is not None and msg is not None:
            with contextlib.suppress(TelegramError):  # cosmetic: a used button goes away
                await app.bot.edit_message_reply_markup(chat.id, msg.message_id, reply_markup=None)
        private = chat.type == "private"
        inbound = InboundMessage(
            channel=self.name, account_id=str(int(user.id)), display_name=user.full_name or "",
            conversation_id=str(int(chat.id)), kind=ConversationKind.DM if private else ConversationKind.GROUP,
            text=press.button.command, message_id=f"{int(chat.id)}:button:{query.id}",
            timestamp=datetime.now(UTC), mentioned=True,
            raw={"chat_type": chat.type, "username": user.username or "", "button": True, "file_unique_ids": ()},
        )
        self.stats["buttons"] += 1
        await self._turn(inbound, msg.message_id if msg is not None else None)

    def _streamer(self, chat_id: int, reply_to: int | None, *, private: bool) -> StreamedReply[int] | None:
        app = self._app
        if not self.cfg.stream or app is None:
            return None
        # Drafts only exist in private chats (and in PTB from 22.6 on; pyproject allows 22.0); a server
        # that refused one is not asked again.
        drafts = private and self.cfg.stream_drafts and self._drafts_ok and hasattr(app.bot, "send_message_draft")
        target = _ChatTarget(self, app, chat_id, reply_to, drafts=drafts)
        return StreamedReply(target, limit=self.max_message_chars, retry_after=retry_after_seconds,
                             settings=self.cfg.stream_settings(), what=f"telegram {chat_id}")

    async def _typing(self, chat_id: int, action: str = ChatAction.TYPING) -> None:
        await asyncio.sleep(_TYPING_DELAY_S)
        while self._app is not None:
            with contextlib.suppress(TelegramError):
                await self._app.bot.send_chat_action(chat_id, action)
            await asyncio.sleep(_TYPING_EVERY_S)

    # ------------------------------------------------------------------------------------- media
    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        what = _describe(attachment)
        if attachment.size > BOT_API_DOWNLOAD_LIMIT:
            raise TooLarge(f"{what} is {mib(attachment.size)}; Telegram lets bots download at most "
                           f"{mib(BOT_API_DOWNLOAD_LIMIT)}")
        check_declared(attachment.size, max_bytes, what)
        app = self._app
        if app is None:
            raise AttachmentUnavailable(f"Telegram is not connected right now, so {what} cannot be fetched")
        if not attachment.platform_id:
            raise AttachmentUnavailable(f"{what} has no Telegram file id")
        try:
            file = await app.bot.get_file(attachment.platform_id)
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                limit = mib(BOT_API_DOWNLOAD_LIMIT)
                raise TooLarge(f"{what} is over the {limit} Telegram lets bots download") from None
            raise AttachmentUnavailable(f"Telegram could not hand over {what} ({exc.message})") from None
        except TelegramError as exc:
            raise AttachmentUnavailable(f"Telegram could not hand over {what} ({exc.__class__.__name__})") from None
        check_declared(file.file_size or 0, max_bytes, what)
        # PTB made file_path the full URL under the bot's base_file_url; anything else (a local
        # Bot API server's disk path) is not ours to read.
        url = file.file_path or ""
        if not url.startswith(app.bot.base_file_url + "/") or ".." in url.split("/"):
            raise AttachmentUnavailable(f"Telegram gave no download path for {what}")
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=15)) as session:
            return await download(session, url, max_bytes=min(max_bytes, BOT_API_DOWNLOAD_LIMIT), what=what)

    # ------------------------------------------------------------------------------------ outbound

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        # A private chat's id is its person's account id: only they may press its buttons.
        person = address.conversation_id if address.kind is ConversationKind.DM else None
        buttons = self._offer(reply, address.conversation_id, person)
        await self._deliver(int(address.conversation_id), self.reply_chunks(reply), buttons=buttons)

    async def _deliver(self, chat_id: int, chunks: list[str], *, reply_to: int | None = None,
                       buttons: InlineKeyboardMarkup | None = None) -> None:
        app = self._app
        if app is None:
            raise RuntimeError("telegram adapter is not connected")
        for i, chunk in enumerate(chunks):
            params = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to and i == 0 else None
            markup = buttons if i == len(chunks) - 1 else None
            await self._limiter.acquire(str(chat_id))
            await with_retry(
                lambda chunk=chunk, params=params, markup=markup: self._send_one(app, chat_id, chunk, params, markup),
                retry_after=retry_after_seconds,
                what="telegram sendMessage",
            )
            self.stats["sent"] += 1

    async def _send_one(
        self, app: Application[Any, Any, Any, Any, Any, Any], chat_id: int, chunk: str, params: ReplyParameters | None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> Message:
        if self.cfg.parse_mode == "html":
            try:
                return await app.bot.send_message(
                    chat_id, markdown_to_telegram_html(chunk), parse_mode=ParseMode.HTML, reply_parameters=params,
                    reply_markup=markup,
                )
            except BadRequest as exc:
                if "parse" not in str(exc).lower():
                    raise
                log.info("telegram: HTML rejected (%s); sending the chunk as plain text", exc)
        return await app.bot.send_message(chat_id, chunk, reply_parameters=params, reply_markup=markup)

    async def _edit_one(self, app: Application[Any, Any, Any, Any, Any, Any], chat_id: int, message_id: int,
                        chunk: str) -> None:
        try:
            if self.cfg.parse_mode == "html":
                try:
                    await app.bot.edit_message_text(markdown_to_telegram_html(chunk), chat_id, message_id,
                                                    parse_mode=ParseMode.HTML)
                    return
                except BadRequest as exc:
                    if "parse" not in str(exc).lower():
                        raise
            await app.bot.edit_message_text(chunk, chat_id, message_id)
        except BadRequest as exc:
            # Two texts that render alike (a trailing "*" the Markdown swallowed): nothing to change.
            if "not modified" not in str(exc).lower():
                raise

    async def _draft_one(self, app: Application[Any, Any, Any, Any, Any, Any], chat_id: int, draft_id: int,
                         chunk: str) -> None:
        try:
            if self.cfg.parse_mode == "html":
                try:
                    await app.bot.send_message_draft(chat_id, draft_id, markdown_to_telegram_html(chunk),
                                                     parse_mode=ParseMode.HTML)
                    return
                except BadRequest as exc:
                    if "parse" not in str(exc).lower():
                        raise
            await app.bot.send_message_draft(chat_id, draft_id, chunk)
        except (BadRequest, EndPointNotFound, InvalidToken):  # PTB reads a 404 (no such method) as InvalidToken
            self._drafts_ok = False  # a Bot API server without drafts: edits from the next reply on
            raise


class _ChatTarget:
    """A Telegram chat a reply streams into (``gateway.delivery.stream.MessageTarget``): the message in
    progress is a draft (``sendMessageDraft``, private chats) sealed by ``sendMessage``, or a message
    edited as it grows (``editMessageText``). Handles are message ids; a draft's is its id negated, so
    the two never meet."""

    def __init__(self, adapter: TelegramAdapter, app: Application[Any, Any, Any, Any, Any, Any], chat_id: int,
                 reply_to: int | None, *, drafts: bool) -> None:
        self.drafts = drafts
        self._adapter, self._app, self._chat_id, self._reply_to = adapter, app, chat_id, reply_to

    async def _paced(self) -> None:
        await self._adapter._limiter.acquire(str(self._chat_id))  # the chat's and the bot's overall rate

    async def _send(self, text: str) -> int:
        params = ReplyParameters(self._reply_to, allow_sending_without_reply=True) if self._reply_to else None
        sent = await self._adapter._send_one(self._app, self._chat_id, text, params)
        self._reply_to = None  # only the first message quotes the question
        self._adapter.stats["sent"] += 1
        return int(sent.message_id)

    async def post(self, text: str) -> int:
        await self._paced()
        if not self.drafts:
            return await self._send(text)
        draft_id = self._adapter.next_draft_id()
        await self._adapter._draft_one(self._app, self._chat_id, draft_id, text)
        return -draft_id

    async def edit(self, handle: int, text: str) -> None:
        await self._paced()
        if handle < 0:
            await self._adapter._draft_one(self._app, self._chat_id, -handle, text)
        else:
            await self._adapter._edit_one(self._app, self._chat_id, handle, text)

    async def seal(self, handle: int | None, text: str) -> int:
        await self._paced()
        return await self._send(text)  # the kept message; the draft lapses by itself

    async def delete(self, handle: int) -> None:
        if handle < 0:
            return  # a draft lapses by itself
        await self._paced()
        await self._app.bot.delete_message(self._chat_id, handle)


def _attachment(kind: str, item: Any) -> Attachment:
    unique = str(getattr(item, "file_unique_id", "") or "")
    name = str(getattr(item, "file_name", "") or "")
    mime = str(getattr(item, "mime_type", "") or "")
    default = _DEFAULT_NAMES.get(kind)
    if kind == "sticker" and getattr(item, "is_animated", False):
        default = ("sticker", ".tgs", "application/x-tgsticker")
    elif kind == "sticker" and getattr(item, "is_video", False):
        default = ("sticker", ".webm", "video/webm")
    if default is not None:
        stem, ext, default_mime = default
        name = name or f"{stem}_{unique or 'file'}{ext}"
        mime = mime or default_mime
    return Attachment(
        kind="video" if kind == "video_note" else kind,
        name=name,
        mime_type=mime,
        size=int(getattr(item, "file_size", 0) or 0),
        platform_id=str(item.file_id),
    )


def merge_album(parts: list[InboundMessage]) -> InboundMessage:
    """One message for an album: its parts' attachments in order, the caption(s) as text, the first
    part's id (the dedupe key: a redelivered album is the same turn)."""
    parts = sorted(parts, key=lambda m: int(m.message_id.rsplit(":", 1)[-1]))
    first = parts[0]
    if len(parts) == 1:
        return first
    text = "\n\n".join(p.text for p in parts if p.text)
    unique_ids = tuple(u for p in parts for u in p.raw.get("file_unique_ids", ()))
    raw = {**first.raw, "file_unique_ids": unique_ids, "album_message_ids": tuple(p.message_id for p in parts)}
    return replace(first, text=text, attachments=tuple(a for p in parts for a in p.attachments),
                   mentioned=any(p.mentioned for p in parts), raw=raw)


def _largest(sizes: Sequence[PhotoSize]) -> PhotoSize:
    return max(sizes, key=lambda p: ((p.width or 0) * (p.height or 0), p.file_size or 0))


def _unique_ids(msg: Message) -> tuple[str, ...]:
    items = [_largest(msg.photo) if msg.photo else None] + [getattr(msg, k, None) for k in _FILE_FIELDS]
    return tuple(str(i.file_unique_id) for i in items if i is not None)


def _describe(attachment: Attachment) -> str:
    return f"the {attachment.kind} {attachment.name!r}" if attachment.name else f"the {attachment.kind}"
