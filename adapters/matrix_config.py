"""The Matrix channel's config section, ``channels.matrix``, its checks, and its registration.

This module is the whole plugin as kith sees it: it is named by both of kith's entry-point groups
(``kith.config`` for the section, ``kith`` for the adapter), exactly as a third-party channel's would
be (docs/plugins.md#a-channel-of-your-own). It imports pydantic and the public API only, so reading a
config never imports mautrix; the adapter (``adapters.matrix``) is imported when the channel is
enabled, and a missing ``matrix`` extra is a config problem naming the install command.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, urlsplit

import aiohttp
from pydantic import Field, SecretStr, field_validator

from gateway.channels import ChannelAccess, ChannelRegistry
from gateway.delivery.stream import StreamingOptions
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.adapter import AdapterRegistry
    from gateway.config import Config

log = logging.getLogger("kith.adapters.matrix")
EXTRA = "pip install 'kith[matrix]'"


class MatrixConfig(ChannelAccess, StreamingOptions):
    homeserver: str = ""  # client-server API base, e.g. https://matrix.example.org
    access_token: SecretStr | None = None  # of the bot's account (docs/channels.md#matrix)
    user_id: str = ""  # @kith:example.org; asked from the homeserver (whoami) when empty
    sync_timeout_s: int = Field(30, ge=0, le=120)  # /sync long-poll
    stall_after_s: float = Field(150, ge=0)  # no /sync answer for this long -> restart the sync loop
    auto_join: bool = True  # accept invites (the access policy still decides who is answered)
    dm_rooms: list[str] = Field(default_factory=list)  # room ids to treat as one-to-one
    edits: Literal["answer", "ignore"] = "answer"  # an edited message (m.replace) is a turn of its own
    max_body_chars: int = Field(16_000, ge=100, le=65_536)  # replies are split to fit
    # Every edit is an event, and Synapse lets a user send ~0.2 events/s after a burst of 10.
    stream_interval_s: float = Field(2.0, ge=0.01, le=60)

    @field_validator("homeserver")
    @classmethod
    def _url(cls, v: str) -> str:
        if v and urlsplit(v).scheme not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        return v.rstrip("/")

    def problems(self, config: Config, path: str) -> list[str]:
        if not self.enabled:
            return []
        found = []
        if not self.homeserver:
            found.append(f"{path}.homeserver: required when the Matrix channel is enabled")
        if self.access_token is None:
            found.append(f"{path}.access_token: required when the Matrix channel is enabled")
        if importlib.util.find_spec("mautrix") is None:
            found.append(f"{path}: the Matrix channel needs the matrix extra ({EXTRA})")
        return found

    async def doctor(self, config: Config) -> list[tuple[str, str]]:
        """The homeserver answers and takes the token (``whoami``); read-only."""
        if not self.enabled:
            return []
        if importlib.util.find_spec("mautrix") is None:
            return [("fail", f"the matrix extra is not installed ({EXTRA})")]
        token = self.access_token.get_secret_value() if self.access_token else ""
        url = f"{self.homeserver}/_matrix/client/v3/account/whoami"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.5)) as http, \
                    http.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:  # fmt: skip
                body = await resp.json(content_type=None) if resp.status in (200, 401, 403) else {}
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            return [("fail", f"{self.homeserver} unreachable ({type(exc).__name__})")]
        if resp.status == 200 and isinstance(body, dict):
            who = str(body.get("user_id", "?"))
            if self.user_id and who != self.user_id:
                return [("fail", f"the token is {who}'s, not {self.user_id}'s")]
            return [("ok", f"signed in to {self.homeserver} as {who}")]
        if resp.status in (401, 403):
            return [("fail", f"{self.homeserver} refused the access token (HTTP {resp.status})")]
        return [("warn", f"{self.homeserver} answered HTTP {resp.status} to whoami")]


def mxc_download_path(mxc: str) -> str:
    """``/_matrix/client/v1/media/download/<server>/<id>`` for ``mxc://<server>/<id>`` (authenticated
    media, Matrix 1.11); ValueError for anything else."""
    parts = urlsplit(mxc)
    media_id = parts.path.lstrip("/")
    if parts.scheme != "mxc" or not parts.netloc or not media_id or "/" in media_id:
        raise ValueError("not an mxc:// URI")
    return f"/_matrix/client/v1/media/download/{quote(parts.netloc, safe='')}/{quote(media_id, safe='')}"


@hookimpl
def gateway_register_channels(register: ChannelRegistry) -> None:
    register("matrix", MatrixConfig)


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    section = config.channels.get("matrix")
    if section is None or not section.enabled:
        return  # never created, so mautrix is never imported
    try:
        module = importlib.import_module("adapters.matrix")
    except ImportError as exc:
        log.error("the Matrix channel is unavailable (%s); %s", exc, EXTRA)
        return
    register(module.MatrixAdapter)
