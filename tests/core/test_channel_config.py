"""Issue 29, item 3: channel sections declared by their plugins (``gateway_register_channels``),
stage settings next to their stages, and model roles found by walking the models."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from gateway.app import Gateway
from gateway.channels import ChannelAccess, ChannelConfig, ChannelRegistry
from gateway.config import Config, ConfigError
from gateway.configread import parse_config
from gateway.configtypes import ModelRole, Section, model_roles
from gateway.hookspecs import hookimpl
from gateway.plugins import BUILTIN_PLUGINS, CONFIG_PLUGINS
from gateway.registrations import collect_registrations
from tests.conftest import make_config

ROOT = Path(__file__).resolve().parents[2]


class KiteConfig(ChannelAccess):
    string_m: int = Field(100, ge=1)
    fallback_role: ModelRole | None = None

    def problems(self, config: Config, path: str) -> list[str]:
        return [f"{path}.string_m: over 50 needs a public_url"] if self.string_m > 50 and not config.server.public_url \
            else []


class Kites:
    """A plugin object declaring one channel, as a test or a plugins.modules module would."""

    __name__ = "kites"

    @hookimpl
    def gateway_register_channels(self, register: ChannelRegistry) -> None:
        register("kite", KiteConfig)


def test_a_declared_channel_is_validated_with_its_model() -> None:
    cfg = parse_config({"channels": {"kite": {"string_m": 10}}}, env={}, plugins=(Kites(),))
    kite = cfg.channels.section("kite", KiteConfig)
    assert kite.string_m == 10 and kite.dm_policy == "pairing"  # its own field, and the shared access ones
    assert cfg.model_dump()["channels"]["kite"]["string_m"] == 10  # dumped as read, not as the empty base
    with pytest.raises(TypeError):
        cfg.channels.section("kite", _Other)
    with pytest.raises(ConfigError) as err:
        parse_config({"channels": {"kite": {"string_m": 0, "tail": 1}}, "llm": {"max_tokens": 0}}, env={},
                     plugins=(Kites(),))
    assert err.value.problems == ["llm.max_tokens: Input should be greater than or equal to 1",
                                  "channels.kite.string_m: Input should be greater than or equal to 1",
                                  "channels.kite.tail: unknown key"]
    with pytest.raises(ConfigError) as err:
        parse_config({"channels": {"kite": {"fallback_role": "nimbus"}}}, env={}, plugins=(Kites(),))
    assert err.value.problems == [
        "channels.kite.fallback_role: unknown model role 'nimbus' (known: main, cheap, vision, transcription; add it "
        "under llm.roles)",
        "channels.kite.string_m: over 50 needs a public_url",
    ]


class _Other(ChannelConfig):
    pass


def test_bad_declarations_are_reported_together() -> None:
    class Sloppy:
        __name__ = "sloppy"

        @hookimpl
        def gateway_register_channels(self, register: ChannelRegistry) -> None:
            register("Bad Name", KiteConfig)
            register("kite2", Section)  # type: ignore[arg-type]  # not a ChannelConfig
            register("sections", KiteConfig)  # a method of the channels model
            register("telegram", KiteConfig)  # the built-in's

    with pytest.raises(ConfigError) as err:
        parse_config({}, env={}, plugins=(Sloppy(),))
    problems = err.value.problems
    assert len(problems) == 4
    assert "channels: plugin sloppy: channel name 'Bad Name' must match ^[a-z][a-z0-9_]{0,31}$" in problems
    assert any("'kite2'" in p and "not a subclass of gateway.channels.ChannelConfig" in p for p in problems)
    assert any("'sections' is taken" in p for p in problems)
    assert any(p.startswith("channels: channel 'telegram' registered twice") for p in problems)


async def test_a_gateway_refuses_a_config_read_without_its_channel_plugin(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)  # read without Kites
    gw = Gateway(cfg, plugins=(Kites(),), entry_points=False)
    with pytest.raises(ConfigError, match=r"channel 'kite' \(kites\) is not in this config"):
        collect_registrations(gw.hooks, gw.config)
    # Read with it, the same gateway starts (gateway.testing passes a test's plugins on: kith_gateway).
    cfg = make_config(tmp_path, extra_plugins=(Kites(),), channels={"kite": {"string_m": 5}})
    async with Gateway(cfg, plugins=(Kites(),), entry_points=False) as gw:
        assert gw.registrations.channels.plugin_of("kite") == "kites"
        assert gw.config.channels.get("kite") == KiteConfig(string_m=5)


def test_every_builtin_that_declares_a_channel_is_read_with_the_config() -> None:
    """A built-in declaring a channel outside CONFIG_PLUGINS would make its section an unknown key."""
    declaring = [m for m in BUILTIN_PLUGINS if hasattr(importlib.import_module(m), "gateway_register_channels")]
    assert sorted(declaring) == sorted(CONFIG_PLUGINS)


def test_model_roles_are_found_by_walking_the_models() -> None:
    cfg = parse_config({"llm": {"roles": {"small": {"model": "m"}}},
                        "background": {"distill": {"mid": {"backend": "small"}}}}, env={})
    # The settings the hand-kept list of _role_problems named (issue 29), now found by their type.
    assert dict(model_roles(cfg)) == {
        "memory.filter_tier.backend": "cheap",
        "background.writer.backend": "cheap",
        "background.sleep.backend": "cheap",
        "background.sleep.curation_backend": "cheap",
        "background.distill.short.backend": "cheap",
        "background.distill.mid.backend": "small",
        "background.distill.long.backend": "main",
        "background.hygiene.backend": "cheap",
    }


def test_stage_settings_live_next_to_their_stages() -> None:
    """gateway/config.py places the stages' sections; their models are defined in the stages' packages."""
    tree = ast.parse((ROOT / "gateway" / "config.py").read_text())
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    moved = {"MemoryConfig", "FilterTierConfig", "BackgroundConfig", "WriterConfig", "SleepConfig", "RailsConfig",
             "DistillConfig", "DistillTier", "RetentionConfig", "HygieneConfig", "McpConfig", "McpServerConfig"}
    assert defined & moved == set()
    fields: dict[str, Any] = Config.model_fields
    assert fields["background"].annotation.__module__ == "gateway.memory.background.settings"
    assert fields["memory"].annotation.__module__ == "gateway.memory.settings"
    assert fields["mcp"].annotation.__module__ == "gateway.mcp.settings"
