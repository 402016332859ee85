"""A local stand-in for an Open-Meteo forecast server (the real wire format, on a free loopback port).

The host fixtures (``kith_gateway``, ``kith_config``) come from kith itself (gateway/testing.py).
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web


def answer(days: int, now_c: float = 18.4) -> dict[str, Any]:
    dates = [f"2026-06-{10 + i:02d}" for i in range(days)]
    return {
        "latitude": 38.72, "longitude": -9.14, "timezone": "Europe/Lisbon",
        "current_units": {"temperature_2m": "°C", "wind_speed_10m": "km/h"},
        "current": {"time": "2026-06-10T14:00", "interval": 900, "temperature_2m": now_c, "weather_code": 2,
                    "wind_speed_10m": 12.3},
        "daily": {"time": dates, "temperature_2m_max": [24.0 + i for i in range(days)],
                  "temperature_2m_min": [15.0 + i for i in range(days)],
                  "precipitation_probability_max": [10 * i for i in range(days)],
                  "weather_code": [2, 61, 3, 0, 0, 1, 95][:days]},
    }


class FakeOpenMeteo:
    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.status = 200
        self.now_c = 18.4
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def forecast(self, request: web.Request) -> web.Response:
        self.requests.append(dict(request.query))
        if self.status != 200:
            return web.json_response({"error": True, "reason": "unavailable"}, status=self.status)
        return web.json_response(answer(int(request.query.get("forecast_days", "7")), self.now_c))

    async def start(self) -> FakeOpenMeteo:
        app = web.Application()
        app.router.add_get("/v1/forecast", self.forecast)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def open_meteo() -> AsyncIterator[FakeOpenMeteo]:
    fake = await FakeOpenMeteo().start()
    yield fake
    await fake.stop()
