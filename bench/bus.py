"""``kith bench bus``: end-to-end no-op jobs/s and enqueue-to-start latency on the embedded server.

The machine is shared, so next to wall-clock figures the result carries CPU time per job (this
process: producers + workers; and redis-server) and the load average at the start: CPU per job is
the figure that stays comparable when other work competes for the cores.

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
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, percentile
from gateway.bus import JobBus, JobContext, JobSpec
from gateway.configread import parse_config


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs in the throughput run")
    parser.add_argument("--producers", type=int, default=16, help="concurrent enqueuers")
    parser.add_argument("--concurrency", type=int, default=64, help="worker pool size (per process)")
    parser.add_argument(
        "--worker-procs",
        type=int,
        default=0,
        help="run the throughput workers in N `kith worker`-like processes (0: in this process)",
    )
    parser.add_argument("--latency-jobs", type=int, default=3_000)
    parser.add_argument("--rate", type=float, default=1_000, help="jobs/s in the latency run")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    parser.set_defaults(func=main)


def _cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a live process (another process: redis-server, a worker)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _drained(bus: JobBus, name: str) -> None:
    stream = bus.keys.stream(name)
    for _ in range(100_000):
        if not await bus.redis.xlen(stream):  # acked entries are deleted: empty = all acked
            return
        await asyncio.sleep(0.001)


async def _spawn_workers(n: int, data_dir: Path, concurrency: int) -> list[asyncio.subprocess.Process]:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.bus", str(data_dir), str(concurrency), stdout=asyncio.subprocess.PIPE
        )
        for _ in range(n)
    ]
    for proc in procs:
        assert proc.stdout is not None
        await proc.stdout.readline()  # "ready"
    return procs


async def run(
    jobs: int, producers: int, concurrency: int, latency_jobs: int, rate: float, worker_procs: int = 0
) -> dict[str, Any]:
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
            children = await _spawn_workers(worker_procs, cfg.data_dir, concurrency)
            workers = None if children else asyncio.create_task(bus.run_workers(concurrency))

            async def produce(start: int) -> None:
                for i in range(start, jobs, producers):
                    await bus.enqueue("noop", {"i": i})

            pid = bus.server.pid if bus.server else None
            load = os.getloadavg()[0]
            child_cpu0 = sum(_cpu_s(c.pid) for c in children)
            cpu0, server0 = time.process_time(), _cpu_s(pid)
            t0 = time.perf_counter()
            await asyncio.gather(*(produce(p) for p in range(producers)))
            enqueue_s = time.perf_counter() - t0
            if not children:
                await all_done.wait()
            await _drained(bus, "noop")
            wall = time.perf_counter() - t0
            client_cpu = time.process_time() - cpu0 + sum(_cpu_s(c.pid) for c in children) - child_cpu0
            server_cpu = _cpu_s(pid) - server0
            for child in children:
                child.send_signal(signal.SIGTERM)
                await child.wait()
            if workers is None:  # the latency run always uses an in-process pool
                workers = asyncio.create_task(bus.run_workers(concurrency))

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
        "worker_procs": worker_procs,
        "wall_s": round(wall, 3),
        "jobs_per_s": round(jobs / wall, 1),
        "enqueue_per_s": round(jobs / enqueue_s, 1),
        "client_cpu_us_per_job": round(client_cpu / jobs * 1e6, 1),
        "server_cpu_us_per_job": round(server_cpu / jobs * 1e6, 1),
        "load_avg_1m_at_start": round(load, 2),
        "latency_jobs": latency_jobs,
        "latency_rate_per_s": rate,
        "latency_p50_ms": round(percentile(latencies, 0.5), 3),
        "latency_p99_ms": round(percentile(latencies, 0.99), 3),
        "latency_max_ms": round(max(latencies), 3),
        "machine": machine(),
    }


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(
        run(args.jobs, args.producers, args.concurrency, args.latency_jobs, args.rate, args.worker_procs)
    )
    if not args.json:
        print(
            f"{result['jobs']} no-op jobs in {result['wall_s']} s: {result['jobs_per_s']} jobs/s; "
            f"enqueue-to-start at {args.rate:.0f}/s p50 {result['latency_p50_ms']} ms, "
            f"p99 {result['latency_p99_ms']} ms"
        )
    print(json.dumps(result))
    return 0


async def _child(data_dir: str, concurrency: int) -> None:
    """A worker process for ``--worker-procs``: attaches to the bench's embedded server."""

    async def noop(ctx: JobContext, payload: dict[str, Any]) -> None:
        return None

    cfg = parse_config({"data_dir": data_dir, "log_level": "WARNING"}, env={})
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with JobBus(cfg, [JobSpec(name="noop", handler=noop)], own_server=False) as bus:
        workers = asyncio.create_task(bus.run_workers(concurrency))
        print("ready", flush=True)
        await stop.wait()
        await bus.stop_workers()
        await workers


if __name__ == "__main__":
    asyncio.run(_child(sys.argv[1], int(sys.argv[2])))
