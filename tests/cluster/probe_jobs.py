"""A plugin the multi-node test loads into each ``kith run`` node: a job that records where it ran.

``cluster.probe`` sleeps a little (so a SIGKILL finds some running), then adds its job id to a Redis
set; every enqueued id must reach that set however often nodes are killed (0 lost jobs).
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.bus import JobContext
from gateway.hookspecs import hookimpl

DONE = "test:probe:done"
RUNS = "test:probe:runs"


async def probe(ctx: JobContext, payload: dict[str, Any]) -> None:
    redis = ctx.bus.redis
    await redis.incr(RUNS)
    await asyncio.sleep(float(payload.get("sleep", 0.2)))
    await redis.sadd(DONE, ctx.job_id)


@hookimpl
def gateway_register_jobs(register: Any) -> None:
    register(probe, name="cluster.probe", timeout=30, max_tries=10)
