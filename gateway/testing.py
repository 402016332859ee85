"""Testing kith and kith plugins: a pytest plugin with a host fixture (docs/plugins.md).

Loaded by pytest through the ``pytest11`` entry point, so a plugin's own test suite gets these
fixtures by installing kith; nothing to import in ``conftest.py``:

* ``kith_config(**overrides)`` -> a validated ``Config`` in the test's temporary directory: the
  ``echo`` model (no network, no key), port 0 (a free port, never the default 8765), no entry points.
* ``kith_gateway(plugins=(...), **overrides)`` -> a started ``Gateway`` with the built-in plugins and
  the given ones (a module or an object with ``@hookimpl`` methods), closed after the test; a channel
  one of them declares may have its section in ``channels=``. Pass ``entry_points=True`` to load
  installed plugins as ``kith run`` does.

``message(text, ...)`` builds an ``InboundMessage`` from a trusted local client, for
``await gateway.handle_inbound(message("hi"))``; ``await gateway.settle()`` waits for the jobs a turn
queued. Nothing here talks to anything the test did not start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gateway.config import Config
from gateway.configread import parse_config
from gateway.types import ConversationKind, InboundMessage

if TYPE_CHECKING:
    from gateway.app import Gateway

ConfigFactory = Callable[..., Config]
GatewayFactory = Callable[..., Awaitable["Gateway"]]


def test_config(data_dir: Path, extra_plugins: tuple[Any, ...] = (), **overrides: Any) -> Config:
    """A config for tests: ``overrides`` are top-level sections; a dict merges into the default one.
    ``extra_plugins``: the plugins the gateway will get besides the built-ins, whose channel sections
    (``gateway_register_channels``) the config may then hold."""
    data: dict[str, Any] = {
        "data_dir": str(data_dir),
        "llm": {"provider": "echo"},
        "server": {"port": 0},
        "plugins": {"entry_points": False},
        "identity": {"offer_timezone": False},  # tests read first replies exactly; tests/schedule turn it on
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_config(data, env={}, plugins=extra_plugins)


test_config.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test pytest should collect


def message(text: str, *, account: str = "alice", channel: str = "websocket", name: str = "",
            group: str = "", at: datetime | None = None) -> InboundMessage:  # fmt: skip
    """A message from a trusted local client (``group``: a group conversation that mentions kith)."""
    extra: dict[str, Any] = {}
    if group:
        extra = {"conversation_id": group, "kind": ConversationKind.GROUP, "mentioned": True}
    return InboundMessage(channel=channel, account_id=account, text=text, display_name=name or account.title(),
                          timestamp=at or datetime.now(UTC), trusted=True, **extra)  # fmt: skip


@pytest.fixture
def kith_config(tmp_path: Path) -> ConfigFactory:
    def factory(**overrides: Any) -> Config:
        return test_config(tmp_path / "data", **overrides)

    return factory


@pytest.fixture
async def kith_gateway(tmp_path: Path) -> AsyncIterator[GatewayFactory]:
    from gateway.app import Gateway

    opened: list[Gateway] = []

    async def factory(*, plugins: tuple[Any, ...] = (), config: Config | None = None,
                      entry_points: bool = False, **overrides: Any) -> Gateway:  # fmt: skip
        cfg = config or test_config(tmp_path / "data", extra_plugins=plugins, **overrides)
        gw = Gateway(cfg, plugins=plugins, entry_points=entry_points)
        await gw.__aenter__()
        opened.append(gw)
        return gw

    yield factory
    for gw in reversed(opened):
        await gw.close()
