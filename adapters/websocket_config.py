"""The WebSocket channel's config section, ``channels.websocket`` (on unless switched off).

Declared by ``adapters.builtin`` with the other built-in channels: ``adapters.websocket`` itself pulls
in the HTTP layer, which reading a config must not.
"""

from __future__ import annotations

from gateway.channels import ChannelConfig


class WebSocketConfig(ChannelConfig):
    enabled: bool = True
