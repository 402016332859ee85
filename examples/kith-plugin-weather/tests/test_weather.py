"""The sample plugin against a real kith host (``kith_gateway``) and a fake forecast server.

Only kith's public API is used: hooks, ``gateway.testing``, ``Gateway.handle_inbound``, ``settle``,
the job bus, and the request the model would receive.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kith_plugin_weather import forecast, plugin

from gateway.config import ConfigError
from gateway.hookspecs import hookimpl
from gateway.testing import message
from gateway.types import LLMRequest, ToolCall, Turn


class Capture:
    """Keeps every request the model would receive (a plugin like any other)."""

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    @hookimpl
    def gateway_before_llm_call(self, turn: Turn, request: LLMRequest) -> None:
        self.requests.append(request)

    def section(self, source: str) -> str | None:
        return next((s.text for s in self.requests[-1].system if s.source == source), None)


def weather(url: str, **extra: Any) -> dict[str, Any]:
    return {"weather": {"place": "Lisbon", "latitude": 38.72, "longitude": -9.14, "api_url": url, **extra}}


async def test_the_forecast_reaches_the_prompt_after_the_refresh_job(kith_gateway: Any, open_meteo: Any) -> None:
    capture = Capture()
    gw = await kith_gateway(plugins=(plugin, capture), extensions=weather(open_meteo.url))
    await gw.settle()  # the start-up refresh (no forecast on disk yet) ran as a job
    assert len(open_meteo.requests) == 1
    query = open_meteo.requests[0]
    assert (query["latitude"], query["longitude"]) == ("38.72", "-9.14")
    await gw.handle_inbound(message("Should I take an umbrella?"))
    text = capture.section("weather")
    assert text is not None and "Now in Lisbon: 18°C, partly cloudy, wind 12 km/h." in text
    assert "2026-06-11: 16-25°C, light rain, 10% chance of rain." in text


async def test_the_refresh_job_runs_on_its_cron_and_replaces_the_forecast(kith_gateway: Any, open_meteo: Any) -> None:
    capture = Capture()
    gw = await kith_gateway(plugins=(plugin, capture), extensions=weather(open_meteo.url, refresh_cron="*/5 * * * *"))
    await gw.settle()
    spec = next(s for s in gw.registrations.jobs.specs if s.name == plugin.JOB)
    assert spec.cron == "*/5 * * * *" and not spec.per_user
    open_meteo.now_c = 3.0
    await gw.bus.enqueue(plugin.JOB, {})  # what the scheduler does at the cron slot
    await gw.settle()
    await gw.handle_inbound(message("And now?"))
    assert "Now in Lisbon: 3°C" in (capture.section("weather") or "")


async def test_the_model_can_ask_for_a_longer_forecast(kith_gateway: Any, open_meteo: Any) -> None:
    capture = Capture()
    gw = await kith_gateway(plugins=(plugin, capture), extensions=weather(open_meteo.url))
    await gw.settle()  # the start-up refresh job asks for 3 days; let it finish so it cannot race the tool's call
    before = len(open_meteo.requests)
    await gw.handle_inbound(message("What about the week?"))
    request = capture.requests[-1]
    assert "weather_forecast" in [t.name for t in request.tools]
    assert request.run_tool is not None  # what a provider calls when the model uses a tool
    result = await request.run_tool(ToolCall(id="c1", name="weather_forecast", input={"days": 5}))
    assert not result.is_error and result.content.count("chance of rain") == 5
    assert [q["forecast_days"] for q in open_meteo.requests[before:]] == ["5"]
    bad = await request.run_tool(ToolCall(id="c2", name="weather_forecast", input={"days": 30}))
    assert bad.is_error and "1 to 7" in bad.content
    open_meteo.status = 503
    down = await request.run_tool(ToolCall(id="c3", name="weather_forecast", input={"days": 2}))
    assert down.is_error and "503" in down.content


async def test_a_stale_or_failed_forecast_stays_out_of_the_prompt(kith_gateway: Any, open_meteo: Any) -> None:
    open_meteo.status = 500
    capture = Capture()
    gw = await kith_gateway(plugins=(plugin, capture), extensions=weather(open_meteo.url),
                            bus={"retry_backoff_s": 0, "retry_backoff_max_s": 0})
    await gw.settle()
    assert len(open_meteo.requests) == 3  # the failing refresh was retried up to max_tries
    await gw.handle_inbound(message("Weather?"))
    assert capture.section("weather") is None
    # A forecast fetched long ago is worse than none.
    fetched = (datetime.now(UTC) - timedelta(hours=5)).isoformat()
    old = forecast.Forecast(place="Lisbon", fetched_at=fetched, now_c=20.0, now_sky="clear sky", wind_kmh=5.0, days=())
    forecast.save(forecast.cache_path(gw.data_dir), old)
    await gw.handle_inbound(message("Weather now?"))
    assert capture.section("weather") is None


async def test_not_configured_the_plugin_adds_nothing(kith_gateway: Any, open_meteo: Any) -> None:
    capture = Capture()
    gw = await kith_gateway(plugins=(plugin, capture))
    await gw.settle()
    await gw.handle_inbound(message("hi"))
    assert capture.section("weather") is None
    assert plugin.JOB not in [s.name for s in gw.registrations.jobs.specs]
    assert "weather_forecast" not in [t.name for t in capture.requests[-1].tools]
    assert not open_meteo.requests


async def test_a_bad_section_refuses_start_up_with_every_problem(kith_gateway: Any) -> None:
    with pytest.raises(ConfigError) as err:
        await kith_gateway(plugins=(plugin,), extensions={"weather": {"place": "", "latitude": 123, "colour": "x"}})
    text = str(err.value)
    for problem in ("extensions.weather.place", "extensions.weather.latitude", "extensions.weather.longitude",
                    "extensions.weather.colour"):
        assert problem in text


async def test_turns_read_the_forecast_file_only_when_it_changed(
    kith_gateway: Any, open_meteo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[object] = []
    real_load = forecast.load
    monkeypatch.setattr(forecast, "load", lambda path: loads.append(path) or real_load(path))
    capture = Capture()
    gw = await kith_gateway(plugins=(plugin, capture), extensions=weather(open_meteo.url))
    await gw.settle()
    before = len(loads)
    for text in ("one", "two", "three"):
        await gw.handle_inbound(message(text))
        assert "Now in Lisbon: 18°C" in (capture.section("weather") or "")
    assert len(loads) - before == 1  # read once; the next turns only stat the unchanged file
    open_meteo.now_c = 3.0
    await gw.bus.enqueue(plugin.JOB, {})
    await gw.settle()
    await gw.handle_inbound(message("and now?"))
    assert "Now in Lisbon: 3°C" in (capture.section("weather") or "")
