"""``channels.pigeon``: the model, its checks, and the hook that declares it (light: pydantic only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, SecretStr, field_validator

from gateway.channels import ChannelAccess, ChannelRegistry
from gateway.configtypes import ModelRole
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.config import Config


class PigeonConfig(ChannelAccess):
    secret: SecretStr | None = None  # the loft signs every post with it (X-Pigeon-Secret)
    webhook_path: str = "/pigeon/loft"
    max_text_chars: int = Field(2000, ge=1, le=10_000)
    # Declared to show that a channel's model roles are checked like the host's (unknown -> an error).
    digest_role: ModelRole = "cheap"

    @field_validator("webhook_path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("must start with '/'")
        return v

    def problems(self, config: Config, path: str) -> list[str]:
        if self.enabled and self.secret is None:
            return [f"{path}.secret: required when the pigeon channel is enabled"]
        return []

    def webhook_paths(self) -> list[str]:
        return [self.webhook_path] if self.enabled else []


@hookimpl
def gateway_register_channels(register: ChannelRegistry) -> None:
    register("pigeon", PigeonConfig)
