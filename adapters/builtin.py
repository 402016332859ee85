"""Built-in plugin registering the platform adapters (Telegram, Discord, Nextcloud Talk).

The host instantiates only channels whose config says ``enabled: true``, and only their modules are
imported: the platform SDKs take ~0.3-0.5 s each to import, paid at every start by people who do not
use them (docs/benchmarks.md, "Footprint"). A platform library that fails to import costs that channel
only: it is logged and not registered, and the other channels still start.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from gateway.adapter import AdapterRegistry
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.config import Config

log = logging.getLogger("kith.adapters")

# (config.channels field, module, class)
ADAPTERS: tuple[tuple[str, str, str], ...] = (
    ("telegram", "adapters.telegram", "TelegramAdapter"),
    ("discord", "adapters.discord", "DiscordAdapter"),
    ("nextcloud", "adapters.nextcloud_talk", "NextcloudTalkAdapter"),
)


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    for channel, module, cls in ADAPTERS:
        if not getattr(getattr(config.channels, channel, None), "enabled", True):
            continue  # a disabled channel is never created: its SDK need not be loaded either
        try:
            adapter = getattr(importlib.import_module(module), cls)
        except ImportError as exc:
            log.error("channel adapter %s is unavailable (%s); reinstall kith with its dependencies", module, exc)
            continue
        register(adapter)
