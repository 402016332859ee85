"""``kith bench web`` runs: one cold and one warm load measured, both with a first paint before the
page is ready to type, the warm one from the service worker."""

from __future__ import annotations

import pytest

from bench.web import _bench
from tests.browser import CHROMIUM

pytestmark = pytest.mark.browser


async def test_the_page_load_benchmark_measures_cold_and_warm_loads() -> None:
    import shutil

    if shutil.which(CHROMIUM) is None:
        pytest.skip("Debian chromium not installed")
    result = await _bench(1, {"width": 390, "height": 844})
    for load in ("cold", "warm"):
        paint, ready = result[load]["first_paint_ms"]["median"], result[load]["ready_ms"]["median"]
        assert 0 < paint <= ready < 20_000, result
    assert result["warm_from_service_worker"] is True
    assert result["machine"]["cpus"]
