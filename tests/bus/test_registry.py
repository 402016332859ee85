"""Jobs come from plugins through ``gateway_register_jobs``; mistakes stop startup with a reason.

Registrations are collected by the plugin host (``gateway.registrations.collect_registrations``) with the adapters
and tools, and every problem is reported in one ``ConfigError`` (it used to be the first ``BusError``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pluggy
import pytest

from gateway import hookspecs
from gateway.bus import BusError, JobContext, JobRegistry, JobSpec
from gateway.config import ConfigError
from gateway.hooks import Hooks
from gateway.hookspecs import hookimpl
from gateway.registrations import Registrations, collect_registrations
from tests.conftest import make_config


async def index_turn(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


class IndexPlugin:
    @hookimpl
    def gateway_register_jobs(self, register: Any) -> None:
        register(index_turn, name="index_turn", timeout=30, max_tries=3)
        register(index_turn, name="sleep_cycle", cron="0 3 * * *")


class GlobalPlugin:
    @hookimpl
    def gateway_register_jobs(self, register: Any) -> None:
        register(index_turn, name="retention", cron="@daily", per_user=False)


def _pm(*plugins: object) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for i, p in enumerate(plugins):
        pm.register(p, name=f"plugin{i}")
    return pm


def _registrations(tmp_path: Path, *plugins: object) -> Registrations:
    return collect_registrations(Hooks(_pm(*plugins)), make_config(tmp_path))


def test_specs_from_plugins_with_attribution(tmp_path: Path) -> None:
    specs = {s.name: s for s in _registrations(tmp_path, IndexPlugin(), GlobalPlugin()).jobs.specs}
    assert set(specs) == {"index_turn", "sleep_cycle", "retention"}
    assert (specs["index_turn"].timeout, specs["index_turn"].max_tries, specs["index_turn"].cron) == (30, 3, None)
    assert specs["sleep_cycle"].cron == "0 3 * * *" and specs["sleep_cycle"].per_user
    assert not specs["retention"].per_user
    assert specs["index_turn"].plugin == "plugin0" and specs["retention"].plugin == "plugin1"


def test_duplicate_names_name_both_plugins(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"registered twice \((plugin0 and plugin1|plugin1 and plugin0)\)"):
        _registrations(tmp_path, IndexPlugin(), IndexPlugin())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Bad Name"}, "must match"),
        ({"name": "ok", "cron": "61 * * * *"}, "invalid cron"),
        ({"name": "ok", "cron": "*/5 * * * * *"}, "5 fields"),
        ({"name": "ok", "timeout": 0}, "timeout"),
        ({"name": "ok", "max_tries": 0}, "max_tries"),
    ],
)
def test_invalid_registrations(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(BusError, match=message):
        JobSpec(handler=index_turn, **kwargs)
    registry = JobRegistry()  # through the registry a bad spec is a problem reported at startup
    with registry.attributed("plugin0"):
        assert registry(index_turn, **kwargs) is None
    assert len(registry.problems) == 1 and message in registry.problems[0] and "plugin0" in registry.problems[0]


def test_name_defaults_to_the_function_name() -> None:
    spec = JobRegistry()(index_turn)
    assert spec is not None and spec.name == "index_turn"
