"""A worker pool: reads job streams through the consumer group and runs handlers concurrently.

One ``Worker`` per process (or in the daemon). It reads all its streams in one blocking
XREADGROUP, claims deliveries abandoned by dead workers (``upkeep.py``), heartbeats its own,
and settles results in batches (``settle.py``). Delivery is at-least-once: handlers must be
idempotent (key effects by ``ctx.job_id``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import random
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from gateway.bus import owners, upkeep
from gateway.bus.context import JobContext
from gateway.bus.envelope import Delivery
from gateway.bus.errors import server_refuses_writes
from gateway.bus.keys import GROUP, Keys
from gateway.bus.registry import JobSpec
from gateway.bus.scripts import Scripts
from gateway.bus.settle import Outcome, Settler
from gateway.config import BusConfig

log = logging.getLogger("kith.bus.worker")
_ReadReply = list[tuple[str, list[tuple[str, dict[str, str]]]]]  # XREADGROUP over RESP2, decoded


@dataclass(slots=True)
class Running:
    delivery: Delivery
    task: asyncio.Task[None] | None = None
    lost: bool = False  # another worker claimed it: never settle this delivery
    settling: bool = field(default=False)


class Worker:
    def __init__(
        self,
        redis: Redis,
        scripts: Scripts,
        keys: Keys,
        cfg: BusConfig,
        specs: Sequence[JobSpec],
        *,
        concurrency: int,
        ctx_factory: Callable[[], Any] | None = None,
        bus: Any = None,
        block_ms: int = 1000,
    ) -> None:
        self.redis, self.scripts, self.keys, self.cfg = redis, scripts, keys, cfg
        self.specs = {keys.stream(s.name): s for s in specs}
        self.concurrency = concurrency
        self.ctx_factory, self.bus, self.block_ms = ctx_factory, bus, block_ms
        self.consumer = owners.new_consumer()
        # Keyed by (stream, entry id): ids come from one server clock, so two streams share them.
        self.inflight: dict[tuple[str, str], Running] = {}
        self.free = concurrency
        self.running: Counter[str] = Counter()  # by stream: what ``JobSpec.concurrency`` caps
        self.slot_freed = asyncio.Event()
        # The claim loop's own wake-up when a slot frees: clearing ``slot_freed`` there could make the
        # read loop miss the very set it was about to wake on, and stop reading with slots free.
        self.claim_wake = asyncio.Event()
        self.stopping = asyncio.Event()
        # Set once running jobs are drained: the heartbeat keeps their deliveries ours until then.
        self.drained = asyncio.Event()
        self.promote_wake = asyncio.Event()
        self.settler = Settler(redis, scripts, keys, self.consumer, self._settled)
        self.claim_idle_ms = cfg.claim_idle_ms
        self.heartbeat_s = (cfg.heartbeat_ms or max(cfg.claim_idle_ms // 3, 20)) / 1000

    def max_tries(self, spec: JobSpec) -> int:
        return spec.max_tries or self.cfg.max_tries

    def room(self, stream: str) -> int:
        """How many more of ``stream``'s jobs may start now: the free slots, within its own cap."""
        cap = self.specs[stream].concurrency
        return self.free if cap is None else min(self.free, cap - self.running[stream])

    async def ensure_groups(self) -> None:
        # Id 0, not $: entries enqueued before the first worker ever started are delivered too. One
        # round trip for every stream (a gateway has about 35), not one each.
        async with self.redis.pipeline(transaction=False) as pipe:
            for stream in self.specs:
                pipe.xgroup_create(stream, GROUP, id="0", mkstream=True)
            results = await pipe.execute(raise_on_error=False)
        for result in results:
            if isinstance(result, ResponseError) and "BUSYGROUP" not in str(result):
                raise result
            if isinstance(result, Exception) and not isinstance(result, ResponseError):
                raise result

    async def run(self) -> None:
        """Run until ``stop()``; then drain running jobs for up to ``bus.shutdown_grace_s``."""
        if not self.specs:
            log.warning("worker has no registered jobs; idling until stopped")
            await self.stopping.wait()
            return
        await self.ensure_groups()
        settle_task = asyncio.create_task(self.settler.run(), name="bus:settle")
        loops = [
            asyncio.create_task(self._read_loop(), name="bus:read"),
            asyncio.create_task(upkeep.claim_loop(self), name="bus:claim"),
            asyncio.create_task(upkeep.promote_loop(self), name="bus:promote"),
        ]
        beat = asyncio.create_task(upkeep.heartbeat_loop(self), name="bus:heartbeat")
        log.info("worker %s: %d queues, concurrency %d", self.consumer, len(self.specs), self.concurrency)
        stop_waiter = asyncio.create_task(self.stopping.wait())
        try:
            # A loop that ends by itself has failed (a bug, an unexpected server reply): stop the
            # whole worker and raise, rather than keep heartbeating while no longer reading.
            done, _ = await asyncio.wait([stop_waiter, *loops], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stop_waiter and not task.cancelled() and task.exception() is not None:
                    log.error("worker loop %s failed; stopping", task.get_name(), exc_info=task.exception())
        finally:
            stop_waiter.cancel()
            self.stopping.set()
            # The read loop may sit in a blocking XREADGROUP for up to ``block_ms``: interrupt it
            # rather than wait it out. Entries the server handed over just before the cancel stay in
            # our pending list (we do not leave the group while we own any), and XAUTOCLAIM gives
            # them to the next worker, as after a crash: nothing is lost, only a claim delay.
            read = loops[0]
            if not read.done():
                read.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await self._drain()
            await self.settler.close(timeout=max(self.cfg.shutdown_grace_s, 1.0))
            await asyncio.gather(settle_task, return_exceptions=True)
            # The heartbeat ends by itself on ``drained``, not by a cancel: a cancel that lands inside a
            # Redis call can come back as a ConnectionError, which the loop retries, and the worker then
            # waited on it for ever (seen under a loaded -n 4 run: stop_workers hung in this gather).
            self.drained.set()
            await asyncio.wait({beat}, timeout=max(self.heartbeat_s * 4, 2.0))
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            await upkeep.leave(self)
            owners.release(self.consumer)
        for task in loops:
            failure = None if task.cancelled() else task.exception()
            if failure is not None:
                raise failure

    def stop(self) -> None:
        self.stopping.set()

    async def _drain(self) -> None:
        tasks = [r.task for r in self.inflight.values() if r.task is not None and not r.task.done()]
        if tasks:
            log.info("waiting up to %.0fs for %d running jobs", self.cfg.shutdown_grace_s, len(tasks))
            _, pending = await asyncio.wait(tasks, timeout=self.cfg.shutdown_grace_s)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # ------------------------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        delay = 0.05
        while not self.stopping.is_set():
            if self.free <= 0:
                self.slot_freed.clear()
                await _wait_any(self.slot_freed, self.stopping)
                continue
            # Streams at their own cap are not read; the count (per stream) never takes one past it.
            rooms = {stream: self.room(stream) for stream in self.specs}
            open_ = {stream: ">" for stream, room in rooms.items() if room > 0}
            if not open_:
                self.slot_freed.clear()
                await _wait_any(self.slot_freed, self.stopping)
                continue
            count = max(1, math.ceil(self.free / len(open_)))
            count = min([count, *(rooms[s] for s in open_ if self.specs[s].concurrency is not None)])
            try:
                resp = await self.redis.xreadgroup(GROUP, self.consumer, open_, count=count, block=self.block_ms)
                delay = 0.05
            except ResponseError as exc:
                if server_refuses_writes(exc):  # a full disk: wait it out, do not stop the worker
                    log.warning("reading jobs failed (%s); retrying in %.2fs", exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                if "NOGROUP" not in str(exc):
                    raise
                log.warning("consumer group missing (server data lost?); recreating")
                await self.ensure_groups()
                continue
            except (RedisError, OSError) as exc:
                log.warning("reading jobs failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            for stream, entries in cast(_ReadReply, resp or []):
                for msg_id, fields in entries:
                    self.spawn(Delivery.from_fields(stream, msg_id, fields, 1))

    def spawn(self, d: Delivery) -> None:
        if (d.stream, d.msg_id) in self.inflight:
            return  # our own delivery came back through XAUTOCLAIM (e.g. after a server restart)
        running = Running(d)
        self.inflight[(d.stream, d.msg_id)] = running
        self.free -= 1
        self.running[d.stream] += 1
        running.task = asyncio.create_task(self._run(running), name=f"job:{d.name}:{d.job_id}")

    # ------------------------------------------------------------------------------------ running

    async def _run(self, running: Running) -> None:
        d = running.delivery
        spec = self.specs[d.stream]
        max_tries = self.max_tries(spec)
        try:
            if d.deliveries > max_tries:
                self._settle(running, Outcome(d, "dead", d.deliveries - 1, 0, "delivery cap exceeded"))
                return
            try:
                payload = d.payload()
            except Exception as exc:  # a payload that cannot be read will never succeed: no retries
                self._settle(running, Outcome(d, "dead", d.deliveries, 0, f"bad envelope: {exc}"))
                return
            ctx = JobContext(
                gateway=self.ctx_factory() if self.ctx_factory else None,
                bus=self.bus,
                job_id=d.job_id,
                name=d.name,
                attempt=d.deliveries,
                max_tries=max_tries,
                enqueued_ms=d.enqueued_ms,
                heartbeat=lambda: upkeep.beat_one(self, d),
            )
            try:
                async with asyncio.timeout(spec.timeout or self.cfg.default_timeout_s):
                    if inspect.iscoroutinefunction(spec.handler):
                        await spec.handler(ctx, payload)
                    else:  # sync handlers run in a thread so they cannot block heartbeats
                        result = await asyncio.to_thread(spec.handler, ctx, payload)
                        if inspect.isawaitable(result):
                            await result
            except asyncio.CancelledError:
                # Shutdown grace ran out: hand the job back now, without counting this delivery.
                self._settle(running, Outcome(d, "retry", d.deliveries - 1, 0, "interrupted by worker shutdown"))
                raise
            except Exception as exc:
                self._settle(running, self._failure(d, max_tries, exc))
            else:
                self._settle(running, Outcome(d, "ok"))
        finally:
            self.free += 1
            self.running[d.stream] -= 1
            self.slot_freed.set()
            self.claim_wake.set()

    def _failure(self, d: Delivery, max_tries: int, exc: Exception) -> Outcome:
        text = "".join(traceback.format_exception(exc))[-4000:]
        if d.deliveries >= max_tries:
            log.error("job %s (%s) failed %d times; dead-lettered: %r", d.job_id, d.name, d.deliveries, exc)
            return Outcome(d, "dead", d.deliveries, 0, text)
        base = self.cfg.retry_backoff_s * 2 ** (d.deliveries - 1)
        backoff = min(base, self.cfg.retry_backoff_max_s) * random.uniform(0.5, 1.0)  # jitter spreads herds
        log.warning(
            "job %s (%s) try %d/%d failed (%r); retry in %.1fs", d.job_id, d.name, d.deliveries, max_tries, exc, backoff
        )
        return Outcome(d, "retry", d.deliveries, int(backoff * 1000), text)

    def _settle(self, running: Running, outcome: Outcome) -> None:
        if running.lost:
            self.inflight.pop((running.delivery.stream, running.delivery.msg_id), None)
            return
        running.settling = True
        self.settler.put(outcome)

    def _settled(self, outcome: Outcome, ok: bool) -> None:
        self.inflight.pop((outcome.delivery.stream, outcome.delivery.msg_id), None)
        if ok and outcome.kind == "retry":
            self.promote_wake.set()  # the backoff may be shorter than the promoter's current sleep


async def _wait_any(*events: asyncio.Event) -> None:
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
