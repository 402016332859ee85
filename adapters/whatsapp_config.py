"""The WhatsApp channel's config section, ``channels.whatsapp``, its checks, and its registration.

WhatsApp through Meta's official Cloud API (the Graph API) over aiohttp: no SDK, so no extra. Named by
kith's ``kith`` and ``kith.config`` entry points like the other channels added in issue 30.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp
from pydantic import Field, SecretStr, field_validator

from gateway.channels import ChannelAccess, ChannelRegistry
from gateway.config import is_loopback_host
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.adapter import AdapterRegistry
    from gateway.config import Config

GRAPH = "https://graph.facebook.com/v21.0"


class WhatsAppConfig(ChannelAccess):
    access_token: SecretStr | None = None  # a system user's permanent token with whatsapp_business_messaging
    phone_number_id: str = ""  # the business number's id (WhatsApp -> API Setup), not the number
    app_secret: SecretStr | None = None  # signs every webhook (X-Hub-Signature-256)
    verify_token: SecretStr | None = None  # your choice; Meta echoes it when the webhook is set up
    webhook_path: str = "/whatsapp/webhook"
    webhook_url: str | None = None  # the public URL given to Meta (its host is ours)
    graph_base: str = GRAPH  # tests point it at a local fake
    # Outside the 24-hour customer service window only an approved template may be sent: its name and
    # language, the message going in as the template's one body parameter ("" = not reachable then).
    template: str = ""
    template_language: str = "en"
    max_text_chars: int = Field(4096, ge=100, le=4096)

    @field_validator("webhook_path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("must start with '/'")
        return v

    @field_validator("graph_base")
    @classmethod
    def _base(cls, v: str) -> str:
        if urlsplit(v).scheme not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        return v.rstrip("/")

    def problems(self, config: Config, path: str) -> list[str]:
        if not self.enabled:
            return []
        found = [f"{path}.{key}: required when the WhatsApp channel is enabled"
                 for key in ("access_token", "phone_number_id", "app_secret", "verify_token")
                 if not getattr(self, key)]  # fmt: skip
        if config.server.token is None and self._public():
            found.append("server.token: required when WhatsApp calls a public URL; set it with ${KITH_TOKEN} "
                         "(docs/security.md#proxies)")
        return found

    def _public(self) -> bool:
        if self.webhook_url is None:
            return self.graph_base == GRAPH  # Meta only calls public HTTPS URLs
        try:
            return not is_loopback_host(urlsplit(self.webhook_url).hostname or "")
        except ValueError:
            return True

    def webhook_paths(self) -> list[str]:
        return [self.webhook_path] if self.enabled else []

    def public_urls(self) -> list[str]:
        return [self.webhook_url] if self.enabled and self.webhook_url else []

    async def doctor(self, config: Config) -> list[tuple[str, str]]:
        if not self.enabled:
            return []
        token = self.access_token.get_secret_value() if self.access_token else ""
        url = f"{self.graph_base}/{self.phone_number_id}?fields=display_phone_number,verified_name"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.5)) as http, \
                    http.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:  # fmt: skip
                body = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            return [("fail", f"Graph API unreachable ({type(exc).__name__})")]
        if resp.status == 200 and isinstance(body, dict):
            return [("ok", f"number {body.get('display_phone_number', '?')} ({body.get('verified_name', '?')})")]
        error = body.get("error", {}) if isinstance(body, dict) else {}
        message = error.get("message", f"HTTP {resp.status}") if isinstance(error, dict) else f"HTTP {resp.status}"
        return [("fail", f"the Graph API refused the number or the token: {message}")]


@hookimpl
def gateway_register_channels(register: ChannelRegistry) -> None:
    register("whatsapp", WhatsAppConfig)


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    section = config.channels.get("whatsapp")
    if section is not None and section.enabled:
        register(importlib.import_module("adapters.whatsapp").WhatsAppAdapter)
