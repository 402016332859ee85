"""Settling deliveries (ack, retry with backoff, dead letter), batched into pipelines.

A finished job is acked by one SETTLE script; results that arrive together go out in one pipeline,
which is what lets a worker keep thousands of jobs per second flowing. A delivery stays "in flight"
(and heartbeated) until its settle is confirmed, so a slow ack never looks like a dead worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from gateway.bus.envelope import Delivery
from gateway.bus.keys import GROUP, Keys
from gateway.bus.scripts import Scripts

log = logging.getLogger("kith.bus.worker")


@dataclass(frozen=True, slots=True)
class Outcome:
    delivery: Delivery
    kind: Literal["ok", "retry", "dead"]
    tries: int = 0  # deliveries so far; becomes the next entry's ``prior`` on retry
    backoff_ms: int = 0
    error: str = ""


class Settler:
    def __init__(
        self,
        redis: Redis,
        scripts: Scripts,
        keys: Keys,
        consumer: str,
        on_settled: Callable[[Outcome, bool], None],
    ) -> None:
        self.redis, self.scripts, self.keys, self.consumer = redis, scripts, keys, consumer
        self.on_settled = on_settled
        self._queue: list[Outcome] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._deadline = float("inf")

    def put(self, outcome: Outcome) -> None:
        self._queue.append(outcome)
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._queue:
                batch, self._queue = self._queue, []
                await self._flush(batch)
            if self._closing and not self._queue:
                return

    async def close(self, timeout: float) -> None:
        """Flush what is queued; after ``timeout`` give up (those deliveries are redelivered)."""
        self._closing = True
        self._deadline = time.monotonic() + timeout
        self._wake.set()

    def _args(self, o: Outcome) -> tuple[list[str], list[str | int]]:
        d = o.delivery
        keys = [d.stream, self.keys.job(d.job_id), self.keys.delayed, self.keys.dead(d.name)]
        args: list[str | int] = [GROUP, self.consumer, d.msg_id, o.kind, d.job_id]
        if o.kind != "ok":
            args += [d.name, d.payload_text, d.version, d.enqueued_ms, o.tries, o.backoff_ms, o.error]
        return keys, args

    async def _flush(self, batch: list[Outcome]) -> None:
        delay = 0.05
        while True:
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for o in batch:
                        keys, args = self._args(o)
                        await self.scripts.settle(keys=keys, args=args, client=pipe)
                    results = await pipe.execute(raise_on_error=False)
                break
            except (RedisError, OSError) as exc:
                if time.monotonic() > self._deadline:
                    log.warning("giving up settling %d deliveries (%s); they will be redelivered", len(batch), exc)
                    for o in batch:
                        self.on_settled(o, False)
                    return
                log.warning("settling %d deliveries failed (%s); retrying in %.2fs", len(batch), exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        for o, result in zip(batch, results, strict=True):
            if isinstance(result, ResponseError):
                log.error("settling job %s (%s) failed: %s", o.delivery.job_id, o.delivery.name, result)
                self.on_settled(o, False)
            elif result == 0:
                # Another worker claimed it (we looked dead); its delivery will settle the job.
                log.warning(
                    "job %s (%s): delivery %s no longer ours (claimed elsewhere, or settled before a retry)",
                    o.delivery.job_id,
                    o.delivery.name,
                    o.delivery.msg_id,
                )
                self.on_settled(o, False)
            else:
                self.on_settled(o, True)
