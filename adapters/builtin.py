"""Built-in plugin for the built-in channels: their config sections and the platform adapters.

``gateway_register_channels`` declares ``channels.websocket``, ``channels.telegram``,
``channels.discord`` and ``channels.nextcloud`` with their models (``adapters/*_config.py``). Every
config read loads this module for that (``gateway.plugins.CONFIG_PLUGINS``), so it imports no
platform SDK at the top.

The host instantiates only channels whose config says ``enabled: true``, and only their modules are
imported: the platform SDKs take ~0.3-0.5 s each to import, paid at every start by people who do not
use them (docs/benchmarks.md, "Footprint"). A platform library that fails to import costs that channel
only: it is logged and not registered, and the other channels still start. (The WebSocket adapter is
registered by its own plugin, ``adapters.websocket``.)
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import TYPE_CHECKING

from adapters.discord_config import DiscordConfig
from adapters.nextcloud_config import NextcloudConfig
from adapters.telegram_config import TelegramConfig
from adapters.websocket_config import WebSocketConfig
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.adapter import AdapterRegistry
    from gateway.channels import ChannelRegistry
    from gateway.config import Config
    from gateway.services import Services
    from gateway.types import ToolCall, Turn

log = logging.getLogger("kith.adapters")
_TOOL_STATUS = frozenset({"telegram", "discord"})  # the built-in channels that show a tool status

# (config.channels field, module, class)
ADAPTERS: tuple[tuple[str, str, str], ...] = (
    ("telegram", "adapters.telegram", "TelegramAdapter"),
    ("discord", "adapters.discord", "DiscordAdapter"),
    ("nextcloud", "adapters.nextcloud_talk", "NextcloudTalkAdapter"),
)


@hookimpl
def gateway_register_channels(register: ChannelRegistry) -> None:
    register("websocket", WebSocketConfig)
    register("telegram", TelegramConfig)
    register("discord", DiscordConfig)
    register("nextcloud", NextcloudConfig)


@hookimpl
async def gateway_before_tool_call(gateway: Services, turn: Turn, call: ToolCall) -> str | None:
    # Telegram and Discord show "Looking that up…" while a tool runs (their ``show_tool_status``,
    # ``tool_status`` in their config); never a veto, and a status that cannot be shown costs nothing.
    adapter = gateway.adapters.get(turn.message.channel)
    show = getattr(adapter, "show_tool_status", None) if turn.message.channel in _TOOL_STATUS else None
    if show is not None:
        try:
            await show(turn.message, call.name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("%s: the tool status was not shown (%s)", turn.message.channel, type(exc).__name__)
    return None


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    for channel, module, cls in ADAPTERS:
        section = config.channels.get(channel)
        if section is None or not section.enabled:
            continue  # a disabled channel is never created: its SDK need not be loaded either
        try:
            adapter = getattr(importlib.import_module(module), cls)
        except ImportError as exc:
            log.error("channel adapter %s is unavailable (%s); reinstall kith with its dependencies", module, exc)
            continue
        register(adapter)
