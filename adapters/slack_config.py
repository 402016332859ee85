"""The Slack channel's config section, ``channels.slack``, its checks, and its registration.

Like ``adapters.matrix_config``, this module is the plugin as kith's entry points name it (groups
``kith.config`` and ``kith``): pydantic and the public API only, the adapter (``adapters.slack``,
slack-sdk) imported only when the channel is enabled, and a missing ``slack`` extra a config problem.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import aiohttp
from pydantic import Field, SecretStr, field_validator

from gateway.channels import ChannelAccess, ChannelRegistry
from gateway.config import is_loopback_host
from gateway.delivery.stream import StreamingOptions
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.adapter import AdapterRegistry
    from gateway.config import Config

log = logging.getLogger("kith.adapters.slack")
EXTRA = "pip install 'kith[slack]'"
SLACK_API = "https://slack.com/api/"


class SlackConfig(ChannelAccess, StreamingOptions):
    bot_token: SecretStr | None = None  # xoxb-...: the Web API (chat.postMessage, files)
    mode: Literal["socket", "events"] = "socket"  # Socket Mode needs no public URL
    app_token: SecretStr | None = None  # xapp-... with connections:write, for Socket Mode
    signing_secret: SecretStr | None = None  # the app's signing secret, for the Events API
    webhook_path: str = "/slack/events"  # Events API and slash-command Request URL (events mode)
    webhook_url: str | None = None  # the public URL Slack calls, when known (its host is ours)
    timestamp_window_s: int = Field(300, ge=30, le=300)  # older signed requests are replays
    api_base: str = SLACK_API  # Web API base (tests point it at a local fake)
    reply_in_thread: bool = True  # in channels, answer in the thread of the message
    slash_command: str = "/kith"  # `/kith link CODE` runs `/link CODE` (Slack keeps `/link` for itself)
    stall_after_s: float = Field(60, ge=0)  # Socket Mode silent (no pong) this long -> reconnect
    stream_interval_s: float = Field(1.2, ge=0.01, le=60)  # chat.update is a Tier 3 method: ~50 a minute

    @field_validator("webhook_path", "slash_command")
    @classmethod
    def _slash(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("must start with '/'")
        return v

    @field_validator("api_base")
    @classmethod
    def _base(cls, v: str) -> str:
        if urlsplit(v).scheme not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        return v if v.endswith("/") else v + "/"

    def problems(self, config: Config, path: str) -> list[str]:
        if not self.enabled:
            return []
        found = []
        if self.bot_token is None:
            found.append(f"{path}.bot_token: required when the Slack channel is enabled")
        if self.mode == "socket" and self.app_token is None:
            found.append(f"{path}.app_token: Socket Mode needs an app-level token (xapp-...)")
        if self.mode == "events" and self.signing_secret is None:
            found.append(f"{path}.signing_secret: the Events API refuses to start without the signing secret")
        if self.mode == "events" and config.server.token is None and self._public():
            found.append("server.token: required when Slack calls a public URL; set it with ${KITH_TOKEN} "
                         "(docs/security.md#proxies)")
        if importlib.util.find_spec("slack_sdk") is None:
            found.append(f"{path}: the Slack channel needs the slack extra ({EXTRA})")
        return found

    def _public(self) -> bool:
        if self.webhook_url is None:
            return self.api_base == SLACK_API  # the real Slack only calls public HTTPS URLs
        try:
            return not is_loopback_host(urlsplit(self.webhook_url).hostname or "")
        except ValueError:
            return True

    def webhook_paths(self) -> list[str]:
        return [self.webhook_path] if self.enabled and self.mode == "events" else []

    def public_urls(self) -> list[str]:
        return [self.webhook_url] if self.enabled and self.mode == "events" and self.webhook_url else []

    async def doctor(self, config: Config) -> list[tuple[str, str]]:
        """``auth.test`` with the bot token (and ``apps.connections.open`` is not called: it would
        hand out a connection); read-only."""
        if not self.enabled:
            return []
        if importlib.util.find_spec("slack_sdk") is None:
            return [("fail", f"the slack extra is not installed ({EXTRA})")]
        token = self.bot_token.get_secret_value() if self.bot_token else ""
        try:
            auth = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.5)) as http, \
                    http.post(self.api_base + "auth.test", headers=auth) as resp:  # fmt: skip
                body = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            return [("fail", f"Slack Web API unreachable ({type(exc).__name__})")]
        if isinstance(body, dict) and body.get("ok") is True:
            return [("ok", f"bot {body.get('user', '?')} in workspace {body.get('team', '?')} ({self.mode} mode)")]
        error = body.get("error", f"HTTP {resp.status}") if isinstance(body, dict) else f"HTTP {resp.status}"
        return [("fail", f"auth.test refused the bot token: {error}")]


@hookimpl
def gateway_register_channels(register: ChannelRegistry) -> None:
    register("slack", SlackConfig)


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    section = config.channels.get("slack")
    if section is None or not section.enabled:
        return
    try:
        module = importlib.import_module("adapters.slack")
    except ImportError as exc:
        log.error("the Slack channel is unavailable (%s); %s", exc, EXTRA)
        return
    register(module.SlackAdapter)
