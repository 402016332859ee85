"""Talking to an Open-Meteo-compatible forecast API, and keeping the last answer on disk.

The forecast is kept in ``<data_dir>/plugins/weather/forecast.json`` (written atomically) rather than
in memory, so a ``kith worker`` process that ran the refresh job and the daemon that builds prompts
see the same forecast.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from kith_plugin_weather.settings import WeatherSettings

# WMO weather interpretation codes, as Open-Meteo reports them.
WMO = {0: "clear sky", 1: "mainly clear", 2: "partly cloudy", 3: "overcast", 45: "fog", 48: "rime fog",
       51: "light drizzle", 53: "drizzle", 55: "dense drizzle", 61: "light rain", 63: "rain", 65: "heavy rain",
       71: "light snow", 73: "snow", 75: "heavy snow", 80: "rain showers", 81: "rain showers",
       82: "violent rain showers", 95: "thunderstorm", 96: "thunderstorm with hail", 99: "thunderstorm with hail"}


class ForecastError(Exception):
    """The forecast server could not be reached or answered something unusable."""


@dataclass(frozen=True, slots=True)
class Day:
    date: str
    low_c: float
    high_c: float
    rain_chance: int
    sky: str


@dataclass(frozen=True, slots=True)
class Forecast:
    place: str
    fetched_at: str  # ISO 8601, UTC
    now_c: float
    now_sky: str
    wind_kmh: float
    days: tuple[Day, ...]

    def age_minutes(self, now: datetime) -> float:
        return (now - datetime.fromisoformat(self.fetched_at)).total_seconds() / 60

    def summary(self, days: int = 2) -> str:
        lines = [f"Now in {self.place}: {self.now_c:.0f}°C, {self.now_sky}, wind {self.wind_kmh:.0f} km/h."]
        for day in self.days[:days]:
            lines.append(f"{day.date}: {day.low_c:.0f}-{day.high_c:.0f}°C, {day.sky}, "
                         f"{day.rain_chance}% chance of rain.")
        return "\n".join(lines)


def _sky(code: Any) -> str:
    return WMO.get(int(code), f"weather code {code}") if isinstance(code, (int, float)) else "unknown"


def parse(place: str, body: Any, now: datetime) -> Forecast:
    try:
        current, daily = body["current"], body["daily"]
        days = tuple(
            Day(date=str(d), low_c=float(lo), high_c=float(hi), rain_chance=int(rain or 0), sky=_sky(code))
            for d, lo, hi, rain, code in zip(
                daily["time"], daily["temperature_2m_min"], daily["temperature_2m_max"],
                daily["precipitation_probability_max"], daily["weather_code"], strict=True,
            )
        )
        return Forecast(place=place, fetched_at=now.astimezone(UTC).isoformat(),
                        now_c=float(current["temperature_2m"]), now_sky=_sky(current["weather_code"]),
                        wind_kmh=float(current["wind_speed_10m"]), days=days)
    except (KeyError, TypeError, ValueError) as exc:
        raise ForecastError(f"unusable forecast answer: {type(exc).__name__}: {exc}") from None


async def fetch(cfg: WeatherSettings, *, days: int = 3) -> Forecast:
    params = {
        "latitude": cfg.latitude, "longitude": cfg.longitude, "timezone": "auto", "forecast_days": days,
        "current": "temperature_2m,weather_code,wind_speed_10m",
        "daily": "temperature_2m_max,temperature_2m_min,precipitation_probability_max,weather_code",
    }
    url = cfg.api_url.rstrip("/") + "/v1/forecast"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=cfg.timeout_s)) as http,
            http.get(url, params={k: str(v) for k, v in params.items()}) as resp,
        ):
            if resp.status != 200:
                raise ForecastError(f"the forecast server answered {resp.status}")
            body = await resp.json()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ForecastError(f"the forecast server could not be reached: {type(exc).__name__}") from None
    return parse(cfg.place, body, datetime.now(UTC))


def cache_path(data_dir: Path) -> Path:
    return data_dir / "plugins" / "weather" / "forecast.json"


def save(path: Path, forecast: Forecast) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".forecast-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(asdict(forecast), out)
    os.replace(tmp, path)


def load(path: Path) -> Forecast | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Forecast(**{**raw, "days": tuple(Day(**d) for d in raw["days"])})
    except (OSError, ValueError, TypeError, KeyError):
        return None
