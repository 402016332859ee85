"""The Telegram channel's config section, ``channels.telegram``, and its checks.

Declared by ``adapters.builtin`` (``gateway_register_channels``) and read by ``adapters.telegram``.
Kept apart from the adapter so that reading a config never imports python-telegram-bot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr

from gateway.channels import ChannelAccess
from gateway.config import is_loopback_host
from gateway.delivery.stream import StreamingOptions
from gateway.media.tts import VoiceOptions

if TYPE_CHECKING:
    from gateway.config import Config


class TelegramConfig(ChannelAccess, StreamingOptions, VoiceOptions):
    token: SecretStr | None = None
    mode: Literal["polling", "webhook"] = "polling"
    webhook_secret: SecretStr | None = None
    webhook_path: str = "/telegram/webhook"
    webhook_url: str | None = None
    base_url: str | None = None  # Bot API server (tests point this at a local fake)
    poll_timeout_s: int = Field(30, ge=0, le=50)  # getUpdates long-poll seconds
    stall_after_s: float = Field(120, ge=0)  # no Bot API answer for this long -> restart the poller
    parse_mode: Literal["html", "plain"] = "html"  # Markdown from the model rendered as Telegram HTML
    # Streaming in private chats shows a draft (sendMessageDraft) rather than a message edited as it grows.
    stream_drafts: bool = True
    tool_status: bool = True  # "Looking that up…" while a tool runs, deleted once the answer is there

    def problems(self, config: Config, path: str) -> list[str]:
        found = []
        if self.enabled and self.token is None:
            found.append(f"{path}.token: required when the Telegram channel is enabled")
        if self.enabled and self.mode == "webhook" and self.webhook_secret is None:
            found.append(f"{path}.webhook_secret: webhook mode refuses to start without a secret")
        if config.server.token is None and self.calls_publicly():
            # Telegram reaches a public URL, so something (a proxy, a tunnel, a port forward) exposes this
            # server to the internet, where loopback is no proof of anything (docs/security.md#proxies).
            where = self.webhook_url or "set outside kith"
            found.append(f"server.token: required when Telegram calls a public webhook ({where}); "
                         "set it with ${KITH_TOKEN} or KITH__SERVER__TOKEN (docs/security.md#proxies)")
        return found

    def calls_publicly(self) -> bool:
        """Webhook mode where the Bot API calling us is not on this machine: the real Telegram (no
        ``base_url``) only calls public HTTPS URLs, and a ``webhook_url`` off this machine is public too."""
        if not self.enabled or self.mode != "webhook":
            return False
        url = self.webhook_url or self.base_url
        if url is None:
            return True
        try:
            return not is_loopback_host(urlsplit(url).hostname or "")
        except ValueError:
            return True

    def webhook_paths(self) -> list[str]:
        return [self.webhook_path] if self.enabled and self.mode == "webhook" else []

    def public_urls(self) -> list[str]:
        # Telegram calls the webhook URL, with its host in the Host header.
        return [self.webhook_url] if self.enabled and self.mode == "webhook" and self.webhook_url else []
