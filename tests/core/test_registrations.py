"""One registry pattern for adapters, jobs and tools (gateway/registry.py, issue 13 item 3).

Registrations are collected once, in ``Gateway.start``, each entry attributed to its plugin; every
problem refuses startup, all of them in one ``ConfigError``; the registration hooks get the config,
so no plugin keeps module-level state between ``gateway_configure`` and registering its jobs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from adapters.websocket import WebSocketAdapter
from gateway.app import Gateway
from gateway.config import ConfigError
from gateway.hookspecs import hookimpl
from gateway.plugins import build_plugin_host
from gateway.registrations import collect_registrations
from gateway.tools import Tool, ToolContext
from gateway.types import InboundMessage
from tests.conftest import make_config


def echo(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    return "ok"


def tool(name: str) -> Tool:
    return Tool(name=name, description="A test tool.", input_schema={"type": "object"}, handler=echo, private=False)


class Sloppy:
    """Every kind of registration mistake at once."""

    __name__ = "sloppy"

    @hookimpl
    def gateway_register_adapters(self, register: Any) -> None:
        register(WebSocketAdapter)  # the built-in websocket plugin registers it too

    @hookimpl
    def gateway_register_jobs(self, register: Any) -> None:
        register(echo, name="sloppy_nightly", cron="61 * * * *")
        register(echo, name="sloppy_ok")  # a good entry after a bad one is still looked at

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        register("not a tool")
        register(tool("memory_search"))  # plugins.tools registers a tool of that name


class Broken:
    __name__ = "broken"

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        raise RuntimeError("cannot import my client")


async def test_every_registration_problem_refuses_startup_in_one_error(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    with pytest.raises(ConfigError) as info:
        async with Gateway(cfg, plugins=(Sloppy(), Broken()), entry_points=False):
            pass
    problems = info.value.problems
    assert len(problems) == 5, problems
    text = "\n".join(problems)
    assert "adapter 'websocket' registered twice" in text and "sloppy" in text
    assert "plugin sloppy: job 'sloppy_nightly': invalid cron expression '61 * * * *'" in text
    assert "plugin sloppy: registered 'not a tool', not a gateway.tools.Tool" in text
    assert "tool 'memory_search' registered twice" in text
    assert "plugin broken: failed in gateway_register_tools: RuntimeError: cannot import my client" in text
    # Refused before anything was opened: no state database, no bus server.
    assert not (Path(cfg.data_dir) / "state.sqlite").exists()


class Counting:
    __name__ = "counting"

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        self.calls += 1
        register(tool("weather"))


async def test_tools_are_collected_once_at_start_and_attributed(make_gateway: Any) -> None:
    counting = Counting()
    gw = await make_gateway(plugins=(counting,))
    assert counting.calls == 1, "collected in Gateway.start, not on the first turn"
    for text in ("one", "two"):
        await gw.handle_inbound(InboundMessage(channel="websocket", account_id="me", text=text, trusted=True))
    assert counting.calls == 1
    regs = gw.registrations
    assert regs.tools["weather"].plugin == "counting" and regs.tools.plugin_of("weather") == "counting"
    assert regs.tools["memory_search"].plugin == "plugins.tools"
    assert regs.adapters.plugin_of("websocket") == "adapters.websocket"
    assert regs.jobs["sleep_cycle"].plugin == "plugins.sleep_cycle"


def _crons(minute: int) -> dict[str, Any]:
    return {"background": {
        "sleep": {"cron": f"{minute} 1 * * *", "group_cron": f"{minute} 2 * * *"},
        "retention": {"cron": f"{minute} 5 * * *"},
        "distill": {"short": {"cron": f"{minute} 6 * * *"}, "mid": {"cron": f"{minute} 7 * * 0"},
                    "long": {"cron": f"{minute} 8 1 * *"}},
    }}  # fmt: skip


def _job_crons(gw: Gateway) -> dict[str, str | None]:
    names = ("sleep_cycle", "sleep_groups", "retention", "retention_groups", "distill_short", "distill_mid",
             "distill_long")  # fmt: skip
    assert gw.bus is not None
    return {n: gw.bus.specs[n].cron for n in names}


async def test_job_crons_come_from_each_gateways_own_config(tmp_path: Path) -> None:
    """Two gateways starting together in one process (tests, a worker next to a daemon): with the
    crons kept in module-level dicts set by ``gateway_configure``, the second configure overwrote
    them before the first gateway registered its jobs."""
    gws = [Gateway(make_config(tmp_path / f"g{m}", **_crons(m)), entry_points=False, serve_http=False,
                   supervise=False, run_jobs=False) for m in (11, 22)]  # fmt: skip
    try:
        await asyncio.gather(*(gw.start() for gw in gws))
        for gw, m in zip(gws, (11, 22), strict=True):
            assert _job_crons(gw) == {
                "sleep_cycle": f"{m} 1 * * *", "sleep_groups": f"{m} 2 * * *", "retention": f"{m} 5 * * *",
                "retention_groups": f"{m} 5 * * *", "distill_short": f"{m} 6 * * *",
                "distill_mid": f"{m} 7 * * 0", "distill_long": f"{m} 8 1 * *",
            }  # fmt: skip
    finally:
        for gw in gws:
            await gw.close()


def test_registration_hooks_get_the_config_without_configure(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **_crons(33))
    regs = collect_registrations(build_plugin_host(cfg).hooks, cfg)
    assert regs.jobs["sleep_cycle"].cron == "33 1 * * *" and regs.jobs["distill_long"].cron == "33 8 1 * *"


def test_jobs_needing_the_memory_index_say_so(tmp_path: Path) -> None:
    """``kith worker`` without the index leaves these queues to the daemon: it learns which from the
    specs, not by importing the plugin (tests/core/test_import_rules.py)."""
    cfg = make_config(tmp_path)
    regs = collect_registrations(build_plugin_host(cfg).hooks, cfg)
    assert {s.name for s in regs.jobs.specs if s.needs_index} == {
        "memory.index", "memory.sync", "memory.rebuild", "memory.purge", "memory.scrub",
    }
