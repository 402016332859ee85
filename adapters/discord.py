"""Discord adapter on discord.py 2.x: ``Client.start`` inside the host's loop (never ``Client.run``).

Required intents: ``guilds``, ``guild_messages``, ``dm_messages`` (defaults) and the privileged
``message_content`` (enable "Message Content Intent" in the developer portal, or guild messages
arrive empty). A 4014 close (intent not enabled), a 4004 close or a 401 at login stop only this
adapter with a clear message.

Reconnects: discord.py resumes a dropped gateway session by itself (RESUME with the last sequence).
We start it with ``reconnect=False`` so that anything it cannot resume surfaces to the host's
supervisor, which owns backoff and reports the state in ``/healthz``. Every gateway frame (heartbeat
ACKs included) calls ``touch()``, so a connection that stays open but goes silent is caught by the
supervisor's watchdog.

DMs always reach the pipeline; in guild channels and threads ``mentioned`` is set for an @mention of
the bot or a reply to one of its messages (the access policy gates on it). Each channel or thread is
its own conversation. Replies are split at 2,000 characters, sent in order with mentions disabled.
A reply to a voice message is also spoken (``voice_replies``, gateway/media/tts.py): an Ogg/Opus file
sent after the text, which never waits on it.

Attachments (images, documents, voice messages) arrive with the message; ``fetch_attachment``
downloads the signed CDN URL Discord gave, and only from Discord's CDN hosts (or the origin of a
configured ``api_base``, which is how tests point at a local fake): a URL naming any other host is
refused, so a crafted payload cannot make kith fetch an arbitrary address. The bot token is never
sent to the CDN, which needs none.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
from typing import TYPE_CHECKING, Any, ClassVar

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket

from adapters.discord_config import DiscordConfig
from adapters.download import check_declared, download
from adapters.ratelimit import RateLimiter, with_retry
from gateway.adapter import Adapter, AdapterAuthError
from gateway.delivery.buttons import PREFIX as BUTTON_PREFIX
from gateway.delivery.buttons import ButtonOffers, offered
from gateway.delivery.stream import OnDelta, StreamedReply, streamed_turn
from gateway.media.errors import AttachmentUnavailable
from gateway.media.tts import voice_reply
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply
from gateway.util.tasks import while_showing

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.discord")

CDN_ORIGINS = frozenset({"https://cdn.discordapp.com", "https://media.discordapp.net"})
TOOL_STATUS = "-# Looking that up…"  # "-# ": Discord's subtext, a line of small grey text
_SENDING = object()
_TYPING_DELAY_S = 0.8  # a dropped stranger's message finishes before this: no typing shown
_FATAL_CLOSE_CODES = {4004: "authentication failed (4004): the bot token is wrong or was reset",
                      4010: "invalid shard (4010)", 4011: "sharding required (4011)",
                      4012: "invalid API version (4012)", 4013: "invalid intents (4013)",
                      4014: "disallowed intents (4014): enable the Message Content Intent for the bot"}


def retry_after_seconds(exc: BaseException) -> float | None:
    if isinstance(exc, discord.HTTPException) and exc.status == 429:
        with contextlib.suppress(AttributeError, TypeError, ValueError):
            return float(exc.response.headers.get("Retry-After", "1"))
        return 1.0
    return None


def intents() -> discord.Intents:
    value = discord.Intents.default()  # guilds, guild_messages, dm_messages, ...
    value.message_content = True  # privileged: must be enabled in the developer portal
    return value


def point_at(api_base: str | None, gateway_url: str | None) -> None:
    """Aim discord.py at another REST base / gateway (a local fake). Process-wide by necessity:
    discord.py reads both from class attributes, so one process serves one Discord endpoint."""
    if api_base:
        discord.http.Route.BASE = api_base.rstrip("/")
    if gateway_url:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


class DiscordAdapter(Adapter):
    name: ClassVar[str] = "discord"
    max_message_chars: ClassVar[int] = 2000

    def __init__(self, gateway: Services, config: DiscordConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("discord", DiscordConfig)
        super().__init__(gateway, cfg)
        self.cfg: DiscordConfig = cfg
        if cfg.token is None:
            raise ValueError("channels.discord.token is required")
        self.stall_after_s = cfg.stall_after_s  # type: ignore[misc]  # per-instance, from config
        self._client: discord.Client | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._limiter = RateLimiter(
            per_key_rate=cfg.send_rate_per_s, per_key_burst=cfg.send_burst, global_rate=40, global_burst=40
        )
        self.stats = {"messages": 0, "sent": 0, "connects": 0, "streamed": 0, "buttons": 0, "voice": 0}
        self._buttons = ButtonOffers()
        # inbound message id -> (its channel, its turn's "looking that up…" message: None yet, or _SENDING)
        self._statuses: dict[str, tuple[Any, Any]] = {}

    # ----------------------------------------------------------------------------------- lifecycle
    def _make_client(self) -> discord.Client:
        client = discord.Client(
            intents=intents(),
            enable_debug_events=True,  # socket_raw_receive: every frame is proof of life
            allowed_mentions=discord.AllowedMentions.none(),
            max_messages=None,
            chunk_guilds_at_startup=False,
        )

        async def on_socket_raw_receive(_: str) -> None:
            # Only a session that reached READY counts as alive: a socket that heartbeats but never
            # gets READY (or RESUMED) is as useless as a silent one, and the watchdog should see it.
            if client.is_ready():
                self.touch()

        async def on_connect() -> None:
            # READY received: the session is up and receives messages. on_ready waits up to
            # guild_ready_timeout for guild data first, so it would report "running" seconds late.
            self.mark_connected()

        async def on_ready() -> None:
            self.stats["connects"] += 1
            self.touch()
            log.info("discord: connected as %s (%d guilds)", client.user, len(client.guilds))

        async def on_message(message: discord.Message) -> None:
            task = asyncio.create_task(self._on_message(client, message), name=f"discord:msg:{message.id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        async def on_interaction(interaction: discord.Interaction) -> None:
            press = self._on_interaction(client, interaction)
            task = asyncio.create_task(press, name=f"discord:press:{interaction.id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        client.event(on_socket_raw_receive)
        client.event(on_connect)
        client.event(on_ready)
        client.event(on_message)
        client.event(on_interaction)
        _guard_parsers(client)
        return client

    async def run(self) -> None:
        point_at(self.cfg.api_base, self.cfg.gateway_url)
        token = self.cfg.token.get_secret_value() if self.cfg.token else ""
        client = self._client = self._make_client()
        try:
            await client.start(token, reconnect=False)
        except discord.LoginFailure:
            raise AdapterAuthError("discord rejected the bot token (401 at login)") from None
        except discord.PrivilegedIntentsRequired:
            raise AdapterAuthError(_FATAL_CLOSE_CODES[4014]) from None
        except discord.ConnectionClosed as exc:
            if exc.code in _FATAL_CLOSE_CODES:
                raise AdapterAuthError(f"discord gateway closed: {_FATAL_CLOSE_CODES[exc.code]}") from None
            raise
        finally:
            if not client.is_closed():
                await client.close()
            self._client = None

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        client = self._client
        if client is not None and not client.is_closed():
            await client.close()

    def health(self) -> dict[str, Any]:
        client = self._client
        user = str(client.user) if client is not None and client.user else ""
        return {"bot": user, **self.stats}

    # ------------------------------------------------------------------------------------- inbound
    def normalize(self, client: discord.Client, message: discord.Message) -> InboundMessage | None:
        me = client.user
        if message.author.bot or (me is not None and message.author.id == me.id):
            return None  # never answer bots: that is how two bots loop forever
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return None  # joins, pins, thread-created notices...
        text = message.content or ""
        if len(text) > 4000:  # Nitro users may send 4,000; anything more is not from Discord
            raise ValueError(f"text of {len(text)} characters is over the platform limit")
        attachments = tuple(
            Attachment(
                kind="voice" if a.is_voice_message() else _kind(a.content_type or ""),
                name=a.filename,
                mime_type=a.content_type or "",
                size=a.size,
                platform_id=str(a.id),
                url=a.url,
            )
            for a in message.attachments
        )
        if not text and not attachments:
            return None
        dm = message.guild is None
        mentioned = dm
        if me is not None and not dm:
            mentioned = me in message.mentions or any(
                u.id == me.id for u in message.mentions
            ) or self._replies_to_me(message, me.id)
        if me is not None:  # show the model a readable handle instead of <@123>
            text = re.sub(rf"<@!?{me.id}>", f"@{me.name}", text).strip()
        channel = message.channel
        raw: dict[str, Any] = {"guild_id": str(message.guild.id) if message.guild else ""}
        if isinstance(channel, discord.Thread):
            raw["parent_id"] = str(channel.parent_id)
        return InboundMessage(
            channel=self.name,
            account_id=str(message.author.id),
            display_name=message.author.display_name,
            conversation_id=str(channel.id),
            kind=ConversationKind.DM if dm else ConversationKind.GROUP,
            text=text,
            message_id=str(message.id),
            timestamp=message.created_at,
            attachments=attachments,
            mentioned=mentioned,
            reply_to=str(message.reference.message_id) if message.reference and message.reference.message_id else "",
            raw=raw,
        )

    @staticmethod
    def _replies_to_me(message: discord.Message, my_id: int) -> bool:
        ref = message.reference
        resolved = ref.resolved if ref is not None else None
        return isinstance(resolved, discord.Message) and resolved.author.id == my_id

    async def _on_message(self, client: discord.Client, message: discord.Message) -> None:
        try:
            inbound = self.normalize(client, message)
        except Exception as exc:
            log.warning("discord: message %s refused: %s", message.id, exc)
            return
        if inbound is None:
            return
        self.stats["messages"] += 1
        await self._answer(inbound, message.channel, message if inbound.kind is ConversationKind.GROUP else None)

    async def _answer(self, inbound: InboundMessage, channel: Any, reference: discord.Message | None) -> None:
        """Run the turn of ``inbound`` and deliver its reply to ``channel`` (streamed where it can be)."""
        stream = self._streamer(channel, reference)
        self._statuses[inbound.message_id] = (channel, None)

        async def turn(on_delta: OnDelta | None) -> Reply | None:
            try:
                return await while_showing(self._typing(channel),
                                           self.gateway.handle_inbound(inbound, on_delta=on_delta))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("discord: turn for message %s failed", inbound.message_id)
                return None
            finally:
                await self._clear_status(self._statuses.pop(inbound.message_id, (channel, None))[1])

        async def deliver(reply: Reply) -> None:
            view = self._offer(reply, inbound.conversation_id, inbound.account_id)
            await self._deliver(channel, self.reply_chunks(reply), reference=reference, view=view)

        try:
            reply, streamed = await streamed_turn(stream, turn, deliver)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("discord: delivering the reply to message %s failed", inbound.message_id)
            return
        if reply is None:
            return
        self.stats["streamed"] += streamed
        await self._speak(channel, inbound, reply)

    async def show_tool_status(self, message: InboundMessage, tool: str) -> None:
        """"Looking that up…" (Discord's small grey subtext) while the turn's first tool runs
        (``gateway_before_tool_call``, adapters/builtin.py), deleted once the answer is there."""
        open_turn = self._statuses.get(message.message_id)
        if not self.cfg.tool_status or open_turn is None or open_turn[1] is not None:
            return
        channel = open_turn[0]
        self._statuses[message.message_id] = (channel, _SENDING)
        await self._limiter.acquire(str(channel.id))
        sent = await channel.send(TOOL_STATUS, allowed_mentions=discord.AllowedMentions.none())
        if message.message_id in self._statuses:
            self._statuses[message.message_id] = (channel, sent)
        else:  # the answer came while it was being sent
            await self._clear_status(sent)

    @staticmethod
    async def _clear_status(status: Any) -> None:
        if isinstance(status, discord.Message):
            try:
                await status.delete()
            except (discord.DiscordException, aiohttp.ClientError) as exc:
                log.info("discord: the tool status stays (%s)", exc.__class__.__name__)

    async def _speak(self, channel: Any, inbound: InboundMessage, reply: Reply) -> None:
        """The reply as an Ogg/Opus file after its text, when ``voice_replies`` wants one (Discord plays
        it inline). The text is already out: a failure here is logged, nothing more (gateway/media/tts.py)."""
        speech = await voice_reply(self.gateway, self.cfg.voice_replies, inbound, reply)
        if speech is None:
            return
        data, name = speech.data, speech.name
        try:
            await self._limiter.acquire(str(channel.id))
            await with_retry(lambda: channel.send(file=discord.File(io.BytesIO(data), filename=name),
                                                  allowed_mentions=discord.AllowedMentions.none()),
                             retry_after=retry_after_seconds, what="discord voice reply")
        except (discord.DiscordException, aiohttp.ClientError) as exc:  # over the upload cap, no permission
            log.warning("discord: the voice reply to %s was not sent (%s); the text was", inbound.message_id,
                        exc.__class__.__name__)
            return
        self.stats["voice"] += 1

    def _offer(self, reply: Reply, conversation_id: str, account_id: str | None) -> discord.ui.View | None:
        """The buttons of a confirmation (``account_id`` None: a DM, where only its person sees them)."""
        wanted = offered(reply)
        if not wanted:
            return None
        view = discord.ui.View(timeout=None)
        for i, made in enumerate(self._buttons.offer(wanted, conversation_id=conversation_id, account_id=account_id)):
            style = discord.ButtonStyle.primary if i == 0 else discord.ButtonStyle.secondary
            view.add_item(discord.ui.Button(label=made.button.label, custom_id=made.token, style=style))
        # Stopped before it is sent, so discord.py does not keep it: presses come to on_interaction,
        # where the offer (not the view) decides who may press.
        view.stop()
        return view

    async def _on_interaction(self, client: discord.Client, interaction: discord.Interaction) -> None:
        try:
            await self._on_press(client, interaction)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("discord: button press %s failed", interaction.id)

    async def _on_press(self, client: discord.Client, interaction: discord.Interaction) -> None:
        """A press of a component: one of ours, by its person, runs its command as their message."""
        if interaction.type is not discord.InteractionType.component:
            return
        data = interaction.data or {}
        token = str(data.get("custom_id", ""))
        user, channel_id = interaction.user, interaction.channel_id
        if not token.startswith(BUTTON_PREFIX) or user is None or user.bot or channel_id is None:
            return
        self.touch()
        press = self._buttons.press(token, conversation_id=str(channel_id), account_id=str(user.id))
        if press.button is None:
            log.info("discord: button press refused (%s)", press.outcome)
            await interaction.response.send_message(press.notice, ephemeral=True)
            return
        await interaction.response.edit_message(view=None)  # a used button goes away
        dm = interaction.guild_id is None
        inbound = InboundMessage(
            channel=self.name, account_id=str(user.id), display_name=user.display_name,
            conversation_id=str(channel_id), kind=ConversationKind.DM if dm else ConversationKind.GROUP,
            text=press.button.command, message_id=f"button:{interaction.id}", timestamp=interaction.created_at,
            mentioned=True, raw={"guild_id": str(interaction.guild_id or ""), "button": True},
        )
        self.stats["buttons"] += 1
        channel = client.get_partial_messageable(channel_id)
        await self._answer(inbound, channel, None if dm else interaction.message)

    def _streamer(self, channel: Any, reference: discord.Message | None) -> StreamedReply[discord.Message] | None:
        if not self.cfg.stream:
            return None
        return StreamedReply(_ChannelTarget(self, channel, reference), limit=self.max_message_chars,
                             retry_after=retry_after_seconds, settings=self.cfg.stream_settings(),
                             what=f"discord {channel.id}")

    @staticmethod
    async def _typing(channel: Any) -> None:
        await asyncio.sleep(_TYPING_DELAY_S)
        async with channel.typing():  # re-sent every few seconds by discord.py until we leave
            await asyncio.Event().wait()

    # ------------------------------------------------------------------------------------- media
    def cdn_allowed(self, url: str) -> bool:
        """True only for Discord's CDN hosts (or the configured REST base's origin: a local fake)."""
        try:
            parsed = yarl.URL(url)
            origin = str(parsed.origin()) if parsed.absolute and not parsed.user and not parsed.password else ""
        except ValueError:
            return False
        allowed = set(CDN_ORIGINS)
        if self.cfg.api_base:
            allowed.add(str(yarl.URL(self.cfg.api_base).origin()))
        return origin in allowed

    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        what = f"the file {attachment.name!r}" if attachment.name else "the attachment"
        check_declared(attachment.size, max_bytes, what)
        if not attachment.url:
            raise AttachmentUnavailable(f"{what} came without a Discord download link")
        if not self.cdn_allowed(attachment.url):
            log.warning("discord: attachment %s points outside Discord's CDN; not fetched", attachment.platform_id)
            raise AttachmentUnavailable(f"{what} is not on Discord's CDN, so it was not fetched")
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=15)) as session:
            return await download(session, attachment.url, max_bytes=max_bytes, what=what)

    # ------------------------------------------------------------------------------------ outbound

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        client = self._client
        if client is None or client.is_closed():
            raise RuntimeError("discord adapter is not connected")
        # In a DM only its person can see (and press) the buttons; a group gets none outside a turn.
        view = self._offer(reply, address.conversation_id, None) if address.kind is ConversationKind.DM else None
        await self._deliver(client.get_partial_messageable(int(address.conversation_id)), self.reply_chunks(reply),
                            view=view)

    async def _deliver(self, channel: Any, chunks: list[str], *, reference: discord.Message | None = None,
                       view: discord.ui.View | None = None) -> None:
        for i, chunk in enumerate(chunks):
            await self._limiter.acquire(str(channel.id))
            ref = reference if i == 0 else None
            extra = {"view": view} if view is not None and i == len(chunks) - 1 else {}
            await with_retry(
                lambda chunk=chunk, ref=ref, extra=extra: channel.send(
                    chunk, reference=ref, mention_author=False, allowed_mentions=discord.AllowedMentions.none(),
                    **extra,
                ),
                retry_after=retry_after_seconds,
                what="discord send",
            )
            self.stats["sent"] += 1


class _ChannelTarget:
    """A Discord channel a reply streams into (``gateway.delivery.stream.MessageTarget``): one message
    posted, then edited as it grows. discord.py waits out a 429 itself (its ``retry_after``); one it
    gives up on reaches the helper as an ``HTTPException`` with status 429."""

    drafts = False

    def __init__(self, adapter: DiscordAdapter, channel: Any, reference: discord.Message | None) -> None:
        self._adapter, self._channel, self._reference = adapter, channel, reference

    async def post(self, text: str) -> discord.Message:
        await self._adapter._limiter.acquire(str(self._channel.id))
        sent: discord.Message = await self._channel.send(
            text, reference=self._reference, mention_author=False, allowed_mentions=discord.AllowedMentions.none())
        self._reference = None  # only the first message quotes the question
        self._adapter.stats["sent"] += 1
        return sent

    async def edit(self, handle: discord.Message, text: str) -> None:
        await self._adapter._limiter.acquire(str(self._channel.id))
        await handle.edit(content=text, allowed_mentions=discord.AllowedMentions.none())

    async def seal(self, handle: discord.Message | None, text: str) -> discord.Message:
        return await self.post(text)  # never called: no drafts on Discord

    async def delete(self, handle: discord.Message) -> None:
        await self._adapter._limiter.acquire(str(self._channel.id))
        await handle.delete()


def _guard_parsers(client: discord.Client) -> None:
    """Make a malformed gateway event cost one log line instead of the connection.

    discord.py calls its per-event parsers inside the websocket read loop, so a KeyError on a payload
    with a missing field would tear down the session (and, with us, restart the adapter). The parser
    table is the dict the websocket reads at dispatch time (``ConnectionState.parsers``, private), so
    wrapping its entries in place is enough.
    """
    parsers: dict[str, Any] = client._connection.parsers

    def guarded(event: str, parse: Any) -> Any:
        def run(data: Any) -> Any:
            try:
                return parse(data)
            except Exception as exc:
                log.warning("discord: malformed %s event ignored (%s: %s)", event, type(exc).__name__, exc)
                return None

        return run

    for event, parse in list(parsers.items()):
        parsers[event] = guarded(event, parse)


def _kind(content_type: str) -> str:
    if content_type.startswith("image/"):
        return "photo"
    if content_type.startswith("audio/"):
        return "audio"
    if content_type.startswith("video/"):
        return "video"
    return "document"
