"""``JobBus``: the one object the gateway, ``kith worker`` and ``kith jobs`` use.

async with JobBus(config, specs, ctx_factory, users_provider=users) as bus:
    await bus.enqueue("index_turn", {"turn_id": turn.id}, job_id=f"index:{turn.id}")
    workers = asyncio.create_task(bus.run_workers())
    scheduler = asyncio.create_task(bus.run_scheduler())
# leaving the block stops both (draining running jobs) and the embedded server
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.bus.clock import Clock
from gateway.bus.connect import check_server, describe, make_client
from gateway.bus.envelope import ENVELOPE_VERSION, check_job_id, encode_payload
from gateway.bus.errors import BusError, UnknownJob
from gateway.bus.keys import Keys
from gateway.bus.registry import JobSpec
from gateway.bus.scheduler import Scheduler, UsersProvider
from gateway.bus.scripts import Scripts
from gateway.bus.server import EmbeddedRedis
from gateway.bus.status import DeadLetter, QueueStatus, dead_letters, discard_dead, queue_status, retry_dead
from gateway.bus.worker import Worker
from gateway.config import Config

log = logging.getLogger("kith.bus")


class JobBus:
    def __init__(
        self,
        config: Config,
        specs: Sequence[JobSpec] = (),
        ctx_factory: Callable[[], Any] | None = None,
        *,
        users_provider: UsersProvider | None = None,
        own_server: bool = True,
        clock: Clock | None = None,
    ) -> None:
        """``own_server``: start the embedded server when no ``bus.url`` is set (``kith run``);
        False attaches to the one a running daemon owns (``kith worker``, ``kith jobs``)."""
        self.config, self.cfg = config, config.bus
        self.specs = {s.name: s for s in specs}
        self.ctx_factory, self.users_provider, self.clock = ctx_factory, users_provider, clock
        self.own_server = own_server
        self.keys = Keys(self.cfg.prefix)
        self.server: EmbeddedRedis | None = None
        self.server_version = ""
        self._redis: Redis | None = None
        self._scripts: Scripts | None = None
        self.worker: Worker | None = None
        self.scheduler: Scheduler | None = None
        self._worker_done = asyncio.Event()
        self._scheduler_done = asyncio.Event()

    # -------------------------------------------------------------------------------- lifecycle

    @property
    def embedded(self) -> bool:
        return self.cfg.url is None and not self.cfg.sentinel_master

    async def start(self) -> None:
        if self.embedded and self.own_server:
            self.server = EmbeddedRedis.claim(self.config.data_dir, appendfsync=self.cfg.appendfsync)
            await self.server.start()
        ready = False
        try:
            self._redis = make_client(self.cfg, self.config.data_dir)
            self.server_version = await check_server(self._redis, describe(self.cfg, self.config.data_dir))
            ready = True
        finally:
            if not ready:
                await self.close()
        self._scripts = Scripts(self._redis)
        log.info("job bus on %s (%s)", describe(self.cfg, self.config.data_dir), self.server_version)

    async def close(self) -> None:
        """Stop the scheduler and workers (draining running jobs), then the embedded server."""
        if self.scheduler is not None:
            self.scheduler.stop()
            await self._scheduler_done.wait()
        await self.stop_workers()
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None
        if self.server is not None:
            await self.server.stop()
            self.server = None

    async def __aenter__(self) -> JobBus:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def redis(self) -> Redis:
        if self._redis is None:
            raise BusError("job bus is not started")
        return self._redis

    @property
    def scripts(self) -> Scripts:
        if self._scripts is None:
            raise BusError("job bus is not started")
        return self._scripts

    # ---------------------------------------------------------------------------------- enqueue

    async def enqueue(
        self, job: str, payload: Mapping[str, Any] | None = None, *, job_id: str | None = None, delay: float = 0
    ) -> str:
        """Queue ``job`` once: while a job with this ``job_id`` is queued, delayed, running or backing
        off, enqueueing it again is a no-op. Returns the job id once Redis has acknowledged it."""
        if self.specs and job not in self.specs:
            raise UnknownJob(f"no plugin registered a job named {job!r}")
        job_id = check_job_id(job_id) if job_id is not None else _new_id()
        text = encode_payload(payload, self.cfg.max_payload_bytes)
        delay_ms = math.ceil(max(delay, 0) * 1000)
        keys = [self.keys.job(job_id), self.keys.stream(job), self.keys.delayed, self.keys.queues]
        try:
            created, state = await self.scripts.enqueue(keys=keys, args=[job_id, job, text, ENVELOPE_VERSION, delay_ms])
        except (RedisError, OSError) as exc:
            raise BusError(f"enqueue of {job} ({job_id}) failed: {exc}") from exc
        if not int(created):
            log.debug("job %s (%s) already %s; not queued again", job_id, job, state)
        elif 0 < delay_ms < PROMOTER_MAX_SLEEP_MS and self.worker is not None:
            # Due before the promoter's next poll, perhaps. A later one never is: the promoter sleeps at
            # most that long and then sees it. (Waking it for every delayed job, as the memory writer
            # queues one each turn, cost a Redis round trip a turn.)
            self.worker.promote_wake.set()
        return job_id

    # ---------------------------------------------------------------------------------- workers

    async def run_workers(
        self, concurrency: int | None = None, *, block_ms: int = 1000, exclude: Sequence[str] = ()
    ) -> None:
        """Run a worker pool until ``stop_workers()`` / ``close()``; ``exclude``: queues it must not
        read (jobs that need something only another process has, like the embedded memory index)."""
        if self.worker is not None:
            raise BusError("workers are already running on this bus")
        self._worker_done.clear()
        self.worker = Worker(
            self.redis,
            self.scripts,
            self.keys,
            self.cfg,
            [s for s in self.specs.values() if s.name not in exclude],
            concurrency=concurrency or self.cfg.concurrency,
            ctx_factory=self.ctx_factory,
            bus=self,
            block_ms=block_ms,
        )
        try:
            await self.worker.run()
        finally:
            self.worker = None
            self._worker_done.set()

    async def stop_workers(self) -> None:
        """Stop reading, wait for running jobs (``bus.shutdown_grace_s``), settle them."""
        if self.worker is not None:
            self.worker.stop()
            await self._worker_done.wait()

    async def run_scheduler(self) -> None:
        """Fire cron jobs until ``close()`` or ``stop_scheduler()``. Safe to run in every daemon sharing
        one Redis (compare-and-set per slot); a cluster runs it on the lease holder only."""
        self.scheduler = self.make_scheduler()
        self._scheduler_done.clear()
        try:
            await self.scheduler.run()
        finally:
            self.scheduler = None
            self._scheduler_done.set()

    async def stop_scheduler(self) -> None:
        """Stop the cron scheduler (this node no longer leads); ``run_scheduler`` may start it again."""
        if self.scheduler is not None:
            self.scheduler.stop()
            await self._scheduler_done.wait()

    def make_scheduler(self) -> Scheduler:
        return Scheduler(
            self.redis,
            self.scripts,
            self.keys,
            list(self.specs.values()),
            users_provider=self.users_provider,
            default_tz=self.config.timezone,
            clock=self.clock,
        )

    # ------------------------------------------------------------------------------- operations

    async def status(self) -> list[QueueStatus]:
        return await queue_status(self.redis, self.keys, self.specs)

    async def dead(self, limit: int = 100) -> list[DeadLetter]:
        return await dead_letters(self.redis, self.keys, self.specs, limit)

    async def retry(self, ident: str) -> str:
        """Re-enqueue a dead letter by job id or entry id: "queued", "already-queued", "not-found"."""
        return await retry_dead(self.redis, self.scripts, self.keys, self.specs, ident)

    async def discard(self, ident: str) -> bool:
        """Delete a dead letter by job id or entry id; False when there is none."""
        return await discard_dead(self.redis, self.keys, self.specs, ident)


#: The longest sleep of ``upkeep.promote_loop`` between two promotions of due delayed jobs.
PROMOTER_MAX_SLEEP_MS = 1000


def _new_id() -> str:
    import uuid

    return uuid.uuid4().hex
