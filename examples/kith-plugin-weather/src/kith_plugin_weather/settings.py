"""The plugin's own config section, ``weather:`` under ``extensions`` in kith's config.yaml.

kith rejects unknown keys everywhere; a plugin does the same for its section, and reports every
problem at once through ``ConfigError`` so the operator fixes the file in one round trip.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.config import Config, ConfigError

SECTION = "weather"


class WeatherSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    place: str = Field(min_length=1, max_length=80)  # shown to the model: "the weather in <place>"
    latitude: float = Field(ge=-90, le=90)
    longitude: float = Field(ge=-180, le=180)
    # Any server speaking the Open-Meteo forecast API (the public one, or one you host).
    api_url: str = "https://api.open-meteo.com"
    refresh_cron: str = "*/30 * * * *"
    stale_after_minutes: int = Field(180, ge=1)  # older forecasts are left out of the prompt
    timeout_s: float = Field(10.0, gt=0, le=60)


def settings(config: Config) -> WeatherSettings | None:
    """The validated section, or None when the plugin is installed but not configured (it stays off)."""
    raw: Any = config.extensions.get(SECTION)
    if raw is None:
        return None
    try:
        return WeatherSettings.model_validate(raw)
    except ValidationError as exc:
        problems = [f"extensions.{SECTION}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ConfigError(problems, "extensions") from None
