"""Jobs come from plugins through ``gateway_register_jobs``; mistakes stop startup with a reason."""

from __future__ import annotations

from typing import Any

import pluggy
import pytest

from gateway import hookspecs
from gateway.bus import BusError, JobContext, JobRegistry, specs_from_plugins
from gateway.hookspecs import hookimpl


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


def test_specs_from_plugins_with_attribution() -> None:
    specs = {s.name: s for s in specs_from_plugins(_pm(IndexPlugin(), GlobalPlugin()))}
    assert set(specs) == {"index_turn", "sleep_cycle", "retention"}
    assert (specs["index_turn"].timeout, specs["index_turn"].max_tries, specs["index_turn"].cron) == (30, 3, None)
    assert specs["sleep_cycle"].cron == "0 3 * * *" and specs["sleep_cycle"].per_user
    assert not specs["retention"].per_user
    assert specs["index_turn"].plugin == "plugin0" and specs["retention"].plugin == "plugin1"


def test_duplicate_names_name_both_plugins() -> None:
    with pytest.raises(BusError, match=r"registered twice \((plugin0 and plugin1|plugin1 and plugin0)\)"):
        specs_from_plugins(_pm(IndexPlugin(), IndexPlugin()))


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
        JobRegistry().register(index_turn, **kwargs)


def test_name_defaults_to_the_function_name() -> None:
    assert JobRegistry().register(index_turn).name == "index_turn"
