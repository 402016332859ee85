"""Channel config sections: declared by the plugin that provides the channel, validated by the host.

The host knows no platform. A plugin that provides a channel declares its section ``channels.<name>``
in ``gateway_register_channels`` (``register(name, Model)``): ``Model`` is a ``ChannelConfig``
(pydantic, unknown keys refused) that also carries the section's checks (``problems``) and what the
host's HTTP guard needs to know about it (``webhook_paths``, ``public_urls``). Reading a config
(``gateway.configread.parse_config``) collects the declarations of the plugins the config loads
(``gateway.plugins.declared_channels``) and validates every section with its model, so a wrong key in
``channels.telegram`` is reported with the host's own problems, all at once. The built-in channels'
models live next to their adapters (``adapters/*_config.py``).

``ChannelAccess`` is the part every chat platform shares, read by the host's access policy
(``gateway/turn/admission.py``): who may talk to the bot, pairing, pacing, supervision.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import Field, create_model

from gateway.configtypes import Section
from gateway.registry import Registry

if TYPE_CHECKING:
    from gateway.config import Config

CHANNEL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class ChannelConfig(Section):
    """One ``channels.<name>`` section. Subclass it (or ``ChannelAccess``) and declare it in
    ``gateway_register_channels``; the host creates the channel's adapter only when ``enabled``."""

    enabled: bool = False

    def problems(self, config: Config, path: str) -> list[str]:
        """What is wrong with this section given the whole validated ``config`` (a field another
        field requires, a setting elsewhere this one needs), one message each, starting with the
        key path (``path`` is ``channels.<name>``). Called only once every section validated."""
        return []

    def webhook_paths(self) -> list[str]:
        """Paths on kith's HTTP server the platform calls. Their requests are authenticated by the
        platform's own secret or signature, so the browser checks (Origin, CSRF) do not apply."""
        return []

    def public_urls(self) -> list[str]:
        """URLs at which the platform calls kith: their hosts are names the server answers to."""
        return []

    async def doctor(self, config: Config) -> list[tuple[str, str]]:
        """``kith doctor``'s checks of this channel: ``(status, detail)`` pairs, status ``ok``, ``warn``,
        ``fail`` or ``skip``. Read-only (ask the platform who the credentials belong to, change nothing)
        and quick: the doctor gives the channels about two seconds together."""
        return []


class ChannelAccess(ChannelConfig):
    """Who may talk to the bot on one channel (see gateway/turn/admission.py and docs/channels.md)."""

    dm_policy: Literal["pairing", "allowlist", "open", "disabled"] = "pairing"
    allow_from: list[str] = Field(default_factory=list)  # account ids allowed to DM
    group_allow: list[str] = Field(default_factory=list)  # conversation ids; "*" = any group
    require_mention: bool = True
    pairing_code_ttl_s: int = Field(3600, ge=60, le=7 * 86400)
    pairing_max_pending: int = Field(20, ge=1, le=1000)  # per channel; fairness: gateway/turn/admission.py
    pairing_reply_interval_s: float = Field(600, ge=0)  # answer a waiting stranger at most this often
    # Supervision: restart the adapter when the platform has been silent this long (0 = never).
    stall_after_s: float = Field(0, ge=0)
    # Outbound pacing per conversation (messages per second, burst) before the platform's own 429s.
    send_rate_per_s: float = Field(1.0, gt=0)
    send_burst: int = Field(5, ge=1)


C = TypeVar("C", bound=ChannelConfig)


class Channels(Section):
    """The ``channels`` section: one field per declared channel (``channels_model`` adds them)."""

    def get(self, name: str) -> ChannelConfig | None:
        """The section of channel ``name``; None when no plugin declared it."""
        value = getattr(self, name, None) if name in type(self).model_fields else None
        return value if isinstance(value, ChannelConfig) else None

    def sections(self) -> dict[str, ChannelConfig]:
        return {name: section for name in type(self).model_fields if (section := self.get(name)) is not None}

    def section(self, name: str, model: type[C]) -> C:
        """The section of channel ``name``, typed as its plugin's ``model`` (KeyError, TypeError)."""
        section = self.get(name)
        if section is None:
            raise KeyError(f"no channel {name!r} is declared")
        if not isinstance(section, model):
            raise TypeError(f"channels.{name} is a {type(section).__name__}, not a {model.__name__}")
        return section


class ChannelRegistry(Registry[type[ChannelConfig]]):
    """The ``register`` handed to ``gateway_register_channels``: ``register(name, Model)`` declares
    the section ``channels.<name>`` and validates it with ``Model`` (a ``ChannelConfig``)."""

    kind = "channel"

    def __call__(self, name: str, model: type[ChannelConfig]) -> None:
        if not isinstance(name, str) or not CHANNEL_NAME.match(name):
            self.problem(f"channel name {name!r} must match {CHANNEL_NAME.pattern}")
            return
        if hasattr(Channels, name):
            self.problem(f"channel name {name!r} is taken by the config model itself")
            return
        if not (isinstance(model, type) and issubclass(model, ChannelConfig)):
            self.problem(f"channel {name!r}: {model!r} is not a subclass of gateway.channels.ChannelConfig")
            return
        self.add(name, model)


def channels_model(declared: ChannelRegistry) -> type[Channels]:
    """The ``channels`` model for these declarations: a field (defaults when absent) per channel,
    every other key unknown."""
    return _model(tuple(declared.items()))


@lru_cache(maxsize=32)
def _model(fields: tuple[tuple[str, type[ChannelConfig]], ...]) -> type[Channels]:
    # Cached: the same plugins declare the same models in every config a process reads (tests read thousands).
    spec: dict[str, object] = {name: (model, Field(default_factory=model)) for name, model in fields}
    return create_model("Channels", __base__=Channels, **spec)  # type: ignore[call-overload, no-any-return]


def channel_problems(config: Config) -> list[str]:
    """Every declared section's own checks, in declaration order."""
    sections = config.channels.sections()
    return [p for name, section in sections.items() for p in section.problems(config, f"channels.{name}")]
