"""Acceptance 4: a third-party plugin through the ``kith`` entry point; fault isolation."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.config import ConfigError
from gateway.hookspecs import hookimpl
from gateway.plugins import build_plugin_host
from gateway.types import ContextSection, InboundMessage
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Any:
    """Install a real distribution with a ``kith`` entry point into a directory on sys.path."""
    site = tmp_path / "site"
    pkg = site / "kith_weather"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        from gateway.hookspecs import hookimpl
        from gateway.types import ContextSection

        @hookimpl
        def gateway_context_sections(turn):
            return [ContextSection(source="kith-weather", title="Weather", text="Forecast: sunny, 21 C.")]
    '''))
    dist = site / "kith_weather-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kith-weather\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kith]\nweather = kith_weather\n")
    sys.path.insert(0, str(site))
    yield "weather"
    sys.path.remove(str(site))
    sys.modules.pop("kith_weather", None)


async def test_entry_point_plugin_contributes_a_section(
    tmp_path: Path, installed_plugin: str, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, plugins={"entry_points": True})
    async with Gateway(cfg) as gw:
        infos = {p.name: p for p in gw.plugin_host.plugins()}
        assert infos["weather"].source == "entry-point kith-weather"
        assert infos["weather"].hooks == ["gateway_context_sections"]
        await gw.handle_inbound(InboundMessage(channel="websocket", account_id="a", text="weather?", trusted=True))
    assert "Forecast: sunny, 21 C." in fake_anthropic.system_text()


async def test_deny_list_blocks_entry_point_plugin(tmp_path: Path, installed_plugin: str) -> None:
    cfg = make_config(tmp_path, plugins={"entry_points": True, "deny": ["weather"]})
    host = build_plugin_host(cfg)
    assert "weather" not in {p.name for p in host.plugins()}
    assert ("weather", "entry-point kith-weather") in host.blocked


class Raiser:
    __name__ = "raiser"

    @hookimpl
    def gateway_context_sections(self) -> list[ContextSection]:
        raise RuntimeError("boom")

    @hookimpl
    def gateway_after_turn(self) -> None:
        raise RuntimeError("after boom")


class Sleeper:
    __name__ = "sleeper"

    @hookimpl
    async def gateway_context_sections(self) -> list[ContextSection]:
        await asyncio.sleep(3600)
        return []


class Good:
    __name__ = "good"

    @hookimpl
    def gateway_context_sections(self) -> list[ContextSection]:
        return [ContextSection(source="good", title="Good", text="still here")]


async def test_raising_and_hanging_plugins_do_not_break_the_turn(
    tmp_path: Path, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The timeout holds for every plugin: at 0.2 s a loaded run timed the built-in people and playbooks
    # sections out too. The sleeper never answers, so any bound shows it; 1 s leaves the others room.
    cfg = make_config(tmp_path, llm=anthropic_llm, plugins={"hook_timeout_s": 1.0})
    gw = await make_gateway(config=cfg, plugins=(Raiser(), Sleeper(), Good()))
    reply = await gw.handle_inbound(InboundMessage(channel="websocket", account_id="a", text="hi", trusted=True))
    assert reply is not None and reply.text.startswith("fake-claude heard: hi")
    assert "still here" in fake_anthropic.system_text()
    assert gw.hooks.failures == {"raiser": 2, "sleeper": 1}
    assert "plugin raiser failed in gateway_context_sections" in caplog.text
    assert "plugin sleeper timed out in gateway_context_sections" in caplog.text


def test_broken_config_module_is_reported(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, plugins={"modules": ["no_such_module_xyz", "gateway.turn.protocol"]})
    with pytest.raises(ConfigError) as info:
        build_plugin_host(cfg)
    assert "no_such_module_xyz" in str(info.value)


def test_unknown_hook_is_reported(tmp_path: Path) -> None:
    class Typo:
        @hookimpl
        def gateway_contxt_sections(self) -> None:
            return None

    with pytest.raises(ConfigError) as info:
        build_plugin_host(make_config(tmp_path), extra_plugins=(Typo(),))
    assert "gateway_contxt_sections" in str(info.value)
