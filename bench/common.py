"""Shared helpers for benchmarks: percentiles and the machine description printed with results."""

from __future__ import annotations

import os
import platform


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def machine() -> dict[str, object]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
