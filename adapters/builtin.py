"""Built-in plugin registering the platform adapters (Telegram, Discord, Nextcloud Talk).

The host instantiates only channels whose config says ``enabled: true``. A platform library that fails
to import costs that channel only: it is logged and not registered, and the other channels still start.
"""

from __future__ import annotations

import importlib
import logging

from gateway.adapter import AdapterRegistry
from gateway.hookspecs import hookimpl

log = logging.getLogger("kith.adapters")

ADAPTERS: tuple[tuple[str, str], ...] = (
    ("adapters.telegram", "TelegramAdapter"),
    ("adapters.discord", "DiscordAdapter"),
    ("adapters.nextcloud_talk", "NextcloudTalkAdapter"),
)


@hookimpl
def gateway_register_adapters(register: AdapterRegistry) -> None:
    for module, cls in ADAPTERS:
        try:
            adapter = getattr(importlib.import_module(module), cls)
        except ImportError as exc:
            log.error("channel adapter %s is unavailable (%s); reinstall kith with its dependencies", module, exc)
            continue
        register(adapter)
