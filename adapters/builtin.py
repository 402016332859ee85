"""Built-in plugin registering the platform adapters (Telegram, Discord, Nextcloud Talk).

The host instantiates only channels whose config says ``enabled: true``. Each adapter module is
imported lazily, so a platform library that fails to import breaks only that channel, and only when
an operator enabled it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from gateway.hookspecs import hookimpl

ADAPTERS: tuple[tuple[str, str], ...] = (
    ("adapters.telegram", "TelegramAdapter"),
    ("adapters.discord", "DiscordAdapter"),
    ("adapters.nextcloud_talk", "NextcloudTalkAdapter"),
)


@hookimpl
def gateway_register_adapters(register: Callable[..., None]) -> None:
    for module, cls in ADAPTERS:
        register(getattr(importlib.import_module(module), cls))
