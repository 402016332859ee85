"""The kith plugin: every hook the sample uses, each a few lines over ``forecast`` and ``settings``.

* ``gateway_configure``       validates the ``extensions.weather`` config section at start-up;
* ``gateway_register_jobs``   a ``weather.refresh`` job on the configured cron, fetching the forecast;
* ``gateway_register_tools``  ``weather_forecast``: the model asks for up to 7 days when it needs them;
* ``gateway_context_sections`` the current weather as a small volatile section of every prompt;
* ``gateway_startup``         validates the section once into per-gateway state, and fetches at start
                              when no recent forecast is on disk.

Installed but not configured (no ``weather:`` section), the plugin registers nothing and adds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.bus.context import JobContext
from gateway.bus.registry import JobRegistry
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolContext, ToolError, ToolRegistry
from gateway.turn.budget import TRIM_PLAYBOOKS
from gateway.types import ContextSection, Stability, StashKey, Turn
from kith_plugin_weather import forecast
from kith_plugin_weather.settings import WeatherSettings, settings

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger("kith.plugins.weather")
JOB = "weather.refresh"


@dataclass(slots=True)
class Weather:
    """What the plugin keeps per gateway: its settings, validated once at start, and the forecast as
    last read from disk, read again only when the file changed (a worker process may have written it).
    Every turn asks for it, so a turn costs one ``stat``, not a validation and a JSON parse."""

    settings: WeatherSettings
    path: Path
    _stamp: tuple[int, int] | None = None  # (mtime_ns, size) of the file last read
    _forecast: forecast.Forecast | None = None

    def fresh(self, now: datetime) -> forecast.Forecast | None:
        """The forecast on disk, or None when there is none or it is stale (worse than none)."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        if (st.st_mtime_ns, st.st_size) != self._stamp:
            self._forecast, self._stamp = forecast.load(self.path), (st.st_mtime_ns, st.st_size)
        current = self._forecast
        if current is None or current.age_minutes(now) > self.settings.stale_after_minutes:
            return None
        return current


WEATHER = StashKey[Weather]()


@hookimpl
def gateway_configure(config: Config) -> None:
    settings(config)  # raises ConfigError with every problem of the section


async def refresh(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Fetch the forecast and keep it on disk; a failure is retried by the bus (``max_tries``)."""
    weather = ctx.gateway.stash.get(WEATHER)
    if weather is None:
        return
    result = await forecast.fetch(weather.settings)
    forecast.save(weather.path, result)
    log.info("weather for %s refreshed", weather.settings.place)


@hookimpl
def gateway_register_jobs(register: JobRegistry, config: Config) -> None:
    cfg = settings(config)
    if cfg is not None:
        # per_user=False: one forecast for the whole install, not one job per person.
        register(refresh, name=JOB, cron=cfg.refresh_cron, timeout=30, max_tries=3, per_user=False)


async def forecast_tool(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    weather = ctx.gateway.stash.get(WEATHER)
    days = args.get("days", 3)
    if weather is None:
        raise ToolError("the weather plugin is not configured")
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= 7:
        raise ToolError("'days' must be a whole number from 1 to 7")
    try:
        result = await forecast.fetch(weather.settings, days=days)
    except forecast.ForecastError as exc:
        raise ToolError(str(exc)) from None
    return result.summary(days)


@hookimpl
def gateway_register_tools(register: ToolRegistry, config: Config) -> None:
    if settings(config) is None:
        return
    register(Tool(
        name="weather_forecast",
        description="The weather forecast for the user's place, day by day (up to 7 days).",
        input_schema={"type": "object", "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 7}}},
        handler=forecast_tool,
        min_tier=1,  # cheap and harmless: offered at every context tier
        private=False,  # touches nobody's memory: fine in group conversations too
        timeout_s=15.0,
    ))


@hookimpl
def gateway_context_sections(gateway: Gateway, turn: Turn) -> list[ContextSection] | None:
    weather = gateway.stash.get(WEATHER)
    current = weather.fresh(datetime.now(UTC)) if weather is not None else None
    if current is None:
        return None
    return [ContextSection(
        source="weather", title="Weather", text=current.summary(days=2), priority=10, budget=120,
        stability=Stability.VOLATILE, trim_rank=TRIM_PLAYBOOKS,
    )]


@hookimpl
async def gateway_startup(gateway: Gateway) -> None:
    cfg = settings(gateway.config)
    if cfg is None:
        return
    weather = gateway.stash[WEATHER] = Weather(cfg, forecast.cache_path(gateway.data_dir))
    if gateway.bus is not None and weather.fresh(datetime.now(UTC)) is None:
        # One job id: a daemon and a worker starting together queue one fetch, not two.
        await gateway.bus.enqueue(JOB, {}, job_id=f"{JOB}:start")  # the prompt gets the weather once it ran
