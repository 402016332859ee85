"""``kith bench bus``: end-to-end no-op jobs/s and enqueue-to-start latency on the embedded server.

Throughput: ``--jobs`` no-op jobs enqueued by ``--producers`` concurrent producers while the worker
pool runs them; the clock stops when the last one is acked (stream and pending list empty).
Latency: ``--latency-jobs`` jobs enqueued at a steady ``--rate`` (an idle-to-busy daemon, not a
saturated one); each handler records now minus the time taken just before its ``enqueue`` call, so
the figure includes the enqueue round trip, the blocking read and the dispatch to the handler.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, percentile
from gateway.bus import JobBus, JobContext, JobSpec
from gateway.config import parse_config


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs in the throughput run")
    parser.add_argument("--producers", type=int, default=16, help="concurrent enqueuers")
    parser.add_argument("--concurrency", type=int, default=64, help="worker pool size")
    parser.add_argument("--latency-jobs", type=int, default=3_000)
    parser.add_argument("--rate", type=float, default=1_000, help="jobs/s in the latency run")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    parser.set_defaults(func=main)


async def _drained(bus: JobBus, name: str) -> None:
    stream = bus.keys.stream(name)
    for _ in range(100_000):
        if not await bus.redis.xlen(stream):  # acked entries are deleted: empty = all acked
            return
        await asyncio.sleep(0.001)


async def run(jobs: int, producers: int, concurrency: int, latency_jobs: int, rate: float) -> dict[str, Any]:
    done = 0
    all_done = asyncio.Event()
    latencies: list[float] = []
    timed_done = asyncio.Event()

    async def noop(ctx: JobContext, payload: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        if done == jobs:
            all_done.set()

    async def timed(ctx: JobContext, payload: dict[str, Any]) -> None:
        latencies.append((time.time_ns() - payload["t"]) / 1e6)
        if len(latencies) == latency_jobs:
            timed_done.set()

    specs = [JobSpec(name="noop", handler=noop), JobSpec(name="timed", handler=timed)]
    with tempfile.TemporaryDirectory(prefix="kith-bench-bus-") as tmp:
        cfg = parse_config({"data_dir": str(Path(tmp) / "data"), "log_level": "WARNING"}, env={})
        async with JobBus(cfg, specs) as bus:
            workers = asyncio.create_task(bus.run_workers(concurrency))

            async def produce(start: int) -> None:
                for i in range(start, jobs, producers):
                    await bus.enqueue("noop", {"i": i})

            t0 = time.perf_counter()
            await asyncio.gather(*(produce(p) for p in range(producers)))
            enqueue_s = time.perf_counter() - t0
            await all_done.wait()
            await _drained(bus, "noop")
            wall = time.perf_counter() - t0

            interval = 1 / rate
            start = time.perf_counter()
            for i in range(latency_jobs):
                # Paced against the start, so a slow enqueue does not lower the offered rate.
                delay = start + i * interval - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await bus.enqueue("timed", {"t": time.time_ns()})
            await timed_done.wait()
            await bus.stop_workers()
            await workers
            server = bus.server_version
    return {
        "bench": "bus",
        "server": server,
        "jobs": jobs,
        "producers": producers,
        "concurrency": concurrency,
        "wall_s": round(wall, 3),
        "jobs_per_s": round(jobs / wall, 1),
        "enqueue_per_s": round(jobs / enqueue_s, 1),
        "latency_jobs": latency_jobs,
        "latency_rate_per_s": rate,
        "latency_p50_ms": round(percentile(latencies, 0.5), 3),
        "latency_p99_ms": round(percentile(latencies, 0.99), 3),
        "latency_max_ms": round(max(latencies), 3),
        "machine": machine(),
    }


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(run(args.jobs, args.producers, args.concurrency, args.latency_jobs, args.rate))
    if not args.json:
        print(
            f"{result['jobs']} no-op jobs in {result['wall_s']} s: {result['jobs_per_s']} jobs/s; "
            f"enqueue-to-start at {args.rate:.0f}/s p50 {result['latency_p50_ms']} ms, "
            f"p99 {result['latency_p99_ms']} ms"
        )
    print(json.dumps(result))
    return 0
