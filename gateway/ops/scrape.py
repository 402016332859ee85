"""What ``/metrics`` reads at scrape time: levels, not events (jobs by state, dead letters, adapter
states, index size, disk space, health).

Each part is read on its own with a deadline; a part that fails or is slow is left out and counted in
``kith_scrape_errors{part}``, so a Redis outage never makes the scrape itself fail (Prometheus would
then lose every other series, ``kith_turns_total`` included, exactly when they matter).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.ops.memory_jobs import health_of_memory_jobs
from gateway.supervisor import AdapterState
from gateway.turn.writefailures import write_failures
from gateway.util.diskspace import free_bytes

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.metrics")

PART_TIMEOUT_S = 2.0  # Prometheus' default scrape timeout is 10 s


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name), follow_symlinks=False).st_blocks * 512
            except OSError:
                continue  # replaced while we walked
    return total


class _Levels:
    """A collector holding one scrape's families (prometheus_client renders any object with ``collect``)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


async def _jobs(gw: Services) -> list[Metric]:
    if gw.bus is None:
        return []
    jobs = GaugeMetricFamily("kith_jobs", "Jobs on the bus by queue and state", labels=("queue", "state"))
    dead = GaugeMetricFamily("kith_dead_letters", "Dead letters by queue (kith jobs dead)", labels=("queue",))
    age = GaugeMetricFamily("kith_job_oldest_age_seconds", "Age of the oldest queued or running job",
                            labels=("queue",))
    consumers = GaugeMetricFamily("kith_job_consumers", "Workers attached to the queue", labels=("queue",))
    for q in await gw.bus.status():
        jobs.add_metric((q.name, "pending"), q.pending)
        jobs.add_metric((q.name, "in_flight"), q.in_flight)
        jobs.add_metric((q.name, "delayed"), q.delayed)
        dead.add_metric((q.name,), q.dead)
        age.add_metric((q.name,), q.oldest_age_s or 0.0)
        consumers.add_metric((q.name,), q.consumers)
    return [jobs, dead, age, consumers]


async def _index(gw: Services) -> list[Metric]:
    mem = gw.memory
    if mem is None or mem.detached:
        return []
    stats = await asyncio.to_thread(mem.stats)  # a Qdrant server's count is a network round trip
    out: list[Metric] = [
        GaugeMetricFamily("kith_index_points", "Chunks in the memory index", value=stats["points"]),
        GaugeMetricFamily("kith_index_queue", "Index operations waiting to run", value=stats["queued"]),
        GaugeMetricFamily("kith_index_paused", "1 while indexing is paused for lack of disk space",
                          value=1 if stats["paused"] else 0),
    ]
    if mem.loader.embedded:
        size = await asyncio.to_thread(_tree_bytes, gw.data_dir / "qdrant")
        out.append(GaugeMetricFamily("kith_index_bytes", "Disk used by the embedded index", value=size))
    return out


async def _disk(gw: Services) -> list[Metric]:
    free = await asyncio.to_thread(free_bytes, gw.data_dir)
    floor = gw.config.memory.min_free_mb * 1024 * 1024
    return [
        GaugeMetricFamily("kith_disk_free_bytes", "Free space on the data directory's filesystem", value=free),
        GaugeMetricFamily("kith_disk_min_free_bytes", "Floor below which indexing pauses (memory.min_free_mb)",
                          value=floor),
    ]


async def _host(gw: Services) -> list[Metric]:
    states = GaugeMetricFamily("kith_adapter_state", "1 for the state each adapter is in",
                               labels=("adapter", "state"))
    restarts = CounterMetricFamily("kith_adapter_restarts", "Adapter restarts by the supervisor", labels=("adapter",))
    for name, item in gw.supervisor.items.items():
        for state in AdapterState:
            states.add_metric((name, state.value), 1 if item.state is state else 0)
        restarts.add_metric((name,), item.restarts)
    failures = CounterMetricFamily("kith_plugin_failures", "Plugin calls that raised or timed out (isolated)",
                                   labels=("plugin",))
    for plugin, n in gw.hooks.failures.items():
        failures.add_metric((plugin,), n)
    problems = gw.memory.health_problems() if gw.memory is not None else []
    if write_failures(gw.stash).problem():
        problems.append("writes")
    return [
        states, restarts, failures,
        GaugeMetricFamily("kith_degraded", "1 when /healthz says degraded", value=1 if problems else 0),
        GaugeMetricFamily("kith_uptime_seconds", "Seconds since the gateway started",
                          value=time.time() - gw.started_at),
        GaugeMetricFamily("kith_model_ready", "1 when the main model role has a provider",
                          value=1 if gw.model_ready else 0),
    ]


async def _memory_jobs(gw: Services) -> list[Metric]:
    """The memory pipeline's state (issue 28), as ``/healthz`` and ``kith doctor`` read it."""
    body = await health_of_memory_jobs(gw)
    if not body or "error" in body:
        raise RuntimeError(str(body.get("error", "no job bus")))
    dead = GaugeMetricFamily("kith_memory_jobs_dead", "Dead-lettered memory jobs by job name", labels=("job",))
    failing = GaugeMetricFamily("kith_memory_jobs_failing", "Memory jobs failing again and again, still retried",
                                labels=("job",))  # fmt: skip
    for name, n in sorted(body["dead_by_job"].items()):
        dead.add_metric((name,), n)
    for name, n in sorted(body["failing_by_job"].items()):
        failing.add_metric((name,), n)
    return [dead, failing]


async def render_levels(gw: Services) -> bytes:
    parts = {"jobs": _jobs, "index": _index, "disk": _disk, "host": _host, "memory_jobs": _memory_jobs}
    results = await asyncio.gather(*(asyncio.wait_for(f(gw), PART_TIMEOUT_S) for f in parts.values()),
                                   return_exceptions=True)
    families: list[Metric] = []
    errors = GaugeMetricFamily("kith_scrape_errors", "1 for each part this scrape could not read",
                               labels=("part",))
    for name, result in zip(parts, results, strict=True):
        if isinstance(result, BaseException):
            if isinstance(result, asyncio.CancelledError):
                raise result
            log.debug("metrics: reading %s failed: %r", name, result)
            errors.add_metric((name,), 1)
        else:
            families.extend(result)
            errors.add_metric((name,), 0)
    families.append(errors)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Levels(families))  # type: ignore[arg-type]
    return generate_latest(registry)
