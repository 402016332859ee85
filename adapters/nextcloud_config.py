"""The Nextcloud Talk channel's config section, ``channels.nextcloud``, and its checks.

Declared by ``adapters.builtin`` (``gateway_register_channels``) and read by ``adapters.nextcloud_talk``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, SecretStr

from gateway.channels import ChannelAccess
from gateway.delivery.stream import StreamingOptions

if TYPE_CHECKING:
    from gateway.config import Config


class NextcloudConfig(ChannelAccess, StreamingOptions):
    base_url: str | None = None
    bot_secret: SecretStr | None = None
    webhook_path: str = "/nextcloud/webhook"
    bot_name: str = "kith"  # "@kith" in a message counts as a mention
    # Rooms to treat as one-to-one (DM policy, per-user memory); every other room is a group.
    dm_rooms: list[str] = Field(default_factory=list)
    # Optional app password of a user in the rooms: looks up room types (one-to-one) and downloads
    # files shared into the rooms over WebDAV (docs/channels.md#media-in).
    api_user: str | None = None
    api_password: SecretStr | None = None
    ack_reaction: str | None = None  # e.g. "\U0001f440": react to a message when a turn starts
    max_body_bytes: int = Field(256 * 1024, ge=1024)
    # Talk's bot API cannot edit, so a streamed reply is written as api_user through the chat API
    # (docs/channels.md#streaming-replies): off unless asked for, since it changes who the reply is from.
    stream: bool = False

    def problems(self, config: Config, path: str) -> list[str]:
        if self.enabled and (self.bot_secret is None or not self.base_url):
            return [f"{path}: base_url and bot_secret are required when enabled"]
        if self.enabled and self.stream and (not self.api_user or self.api_password is None):
            return [f"{path}: stream needs api_user and api_password (the streamed reply is written as that user)"]
        return []

    def webhook_paths(self) -> list[str]:
        return [self.webhook_path] if self.enabled else []
