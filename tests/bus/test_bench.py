"""``kith bench bus`` runs end to end and reports what docs/benchmarks.md records."""

from __future__ import annotations

from bench.bus import run


async def test_bench_bus_small_run() -> None:
    result = await run(jobs=500, producers=4, concurrency=8, latency_jobs=50, rate=500)
    assert result["jobs"] == 500 and result["jobs_per_s"] > 0
    assert 0 < result["latency_p50_ms"] <= result["latency_p99_ms"] <= result["latency_max_ms"]
    assert result["server"].startswith(("valkey", "redis"))


async def test_bench_bus_with_a_worker_process() -> None:
    result = await run(jobs=300, producers=4, concurrency=8, latency_jobs=20, rate=500, worker_procs=1)
    assert result["worker_procs"] == 1 and result["jobs_per_s"] > 0 and result["client_cpu_us_per_job"] > 0
