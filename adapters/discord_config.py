"""The Discord channel's config section, ``channels.discord``, and its checks.

Declared by ``adapters.builtin`` (``gateway_register_channels``) and read by ``adapters.discord``.
Kept apart from the adapter so that reading a config never imports discord.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, SecretStr

from gateway.channels import ChannelAccess
from gateway.delivery.stream import StreamingOptions
from gateway.media.tts import VoiceOptions

if TYPE_CHECKING:
    from gateway.config import Config


class DiscordConfig(ChannelAccess, StreamingOptions, VoiceOptions):
    token: SecretStr | None = None
    api_base: str | None = None  # REST base, e.g. http://127.0.0.1:P/api/v10 (tests: a local fake)
    gateway_url: str | None = None  # gateway websocket, e.g. ws://127.0.0.1:P/ (tests: a local fake)
    stall_after_s: float = Field(180, ge=0)  # no gateway frame (heartbeat ack, event) for this long
    tool_status: bool = True  # "Looking that up…" while a tool runs, deleted once the answer is there

    def problems(self, config: Config, path: str) -> list[str]:
        if self.enabled and self.token is None:
            return [f"{path}.token: required when the Discord channel is enabled"]
        return []
