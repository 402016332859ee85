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
        await close_within(gw, CLOSE_TIMEOUT_S)


#: A gateway closes in well under a second when idle; one that has not closed after this fails its test
#: with the stack of every task still running, instead of hanging until the runner's own timeout, which
#: shows only the threads (all idle in the event loop's select).
CLOSE_TIMEOUT_S = 60.0


def task_stacks(loop: Any = None) -> str:
    """The await chain of every task of ``loop`` (the running one by default) but the caller's
    (Task.print_stack shows only a task's top frame): what a hang is waiting for."""
    import asyncio
    import io

    out = io.StringIO()
    current = asyncio.current_task() if loop is None else None
    for task in asyncio.all_tasks(loop):
        if task is current:
            continue
        print(f"--- {task.get_name()}", file=out)
        awaited: Any = task.get_coro()
        while awaited is not None:
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is not None:
                print(f"    {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}", file=out)
            nxt = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
            if nxt is None and frame is None:
                print(f"    awaiting {awaited!r}", file=out)
            awaited = nxt
    return out.getvalue()


async def close_within(gateway: Any, timeout: float) -> None:
    import asyncio

    closing = asyncio.ensure_future(gateway.close())
    done, _ = await asyncio.wait({closing}, timeout=timeout)
    if closing in done:
        closing.result()
        return
    raise AssertionError(f"the gateway did not close within {timeout:.0f} s; its tasks:\n{task_stacks()}")
