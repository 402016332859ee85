"""The Signal channel's config section, ``channels.signal``, its checks, and its registration.

Signal has no bot API: kith talks to a ``signal-cli`` daemon (``signal-cli -a +NUMBER daemon --http
127.0.0.1:8080``), the documented JSON-RPC interface most bridges use. Like the Matrix and Slack
plugins this module is named by kith's ``kith`` and ``kith.config`` entry points; the adapter needs
nothing beyond aiohttp, so there is no extra to install.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp
from pydantic import Field, field_validator

from gateway.channels import ChannelAccess, ChannelRegistry
from gateway.config import is_loopback_host
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.adapter import AdapterRegistry
    from gateway.config import Config


class SignalConfig(ChannelAccess):
    daemon_url: str = "http://127.0.0.1:8080"  # signal-cli daemon --http
    account: str = ""  # the bot's number, +E.164 (sent as "account" when the daemon serves several)
    bot_name: str = "kith"  # "@kith" in a group message counts as a mention
    max_text_chars: int = Field(4000, ge=100, le=60_000)

    @field_validator("daemon_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if urlsplit(v).scheme not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        return v.rstrip("/")

    @field_validator("account")
    @classmethod
    def _number(cls, v: str) -> str:
        if v and not (v.startswith("+") and v[1:].isdigit() and 7 <= len(v) <= 16):
            raise ValueError("must be a phone number in +E.164 form, e.g. +4915112345678")
        return v

    def problems(self, config: Config, path: str) -> list[str]:
        if not self.enabled:
            return []
        found = []
        if not self.account:
            found.append(f"{path}.account: required when the Signal channel is enabled (the bot's number)")
        host = urlsplit(self.daemon_url).hostname or ""
        try:
            local = is_loopback_host(host)
        except ValueError:
            local = False
        if not local and urlsplit(self.daemon_url).scheme != "https":
            # signal-cli's HTTP interface has no authentication: whoever reaches it speaks as the bot.
            found.append(f"{path}.daemon_url: signal-cli's HTTP interface has no authentication; keep it on "
                         "this machine (127.0.0.1) or behind an authenticating HTTPS proxy")
        return found

    async def doctor(self, config: Config) -> list[tuple[str, str]]:
        if not self.enabled:
            return []
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.5)) as http, \
                    http.get(self.daemon_url + "/api/v1/check") as resp:  # fmt: skip
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return [("fail", f"signal-cli daemon at {self.daemon_url} unreachable ({type(exc).__name__})")]
        if status == 200:
            return [("ok", f"signal-cli daemon at {self.daemon_url} answers (account {self.account})")]
        return [("fail", f"signal-cli daemon at {self.daemon_url} answered HTTP {status} to /api/v1/check")]


@hookimpl
def gateway_register_channels(register: ChannelRegistry) -> None:
    register("signal", SignalConfig)


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    section = config.channels.get("signal")
    if section is not None and section.enabled:
        register(importlib.import_module("adapters.signal").SignalAdapter)
