"""``Cluster``: this node's part in a cluster, as the gateway sees it (``gw.cluster``).

- ``on_leader(start, stop)``: work that must run on one node at a time (cron ticks, the schedule's
  start-up arming sweep, the delivery outbox sweep). ``start`` runs when this node becomes the holder
  of the ``scheduler`` lease, ``stop`` as soon as it is no longer sure to hold it (renewal refused,
  Redis unreachable past the lease's local validity, shutdown). One node (``cluster.enabled`` off):
  this node is always the leader, ``start`` runs at once and nothing is renewed.
- ``turn_lock(scope)``: one person's (one conversation scope's) turns one at a time across nodes;
  a no-op with one node, whose turns keep today's in-process behaviour and cost.
- memory file writes: while clustered, the guarded store takes a Redis lock per file around its
  flock (``set_cross_host_lock``), so writes from two hosts to one file never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import redis as sync_redis
from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.cluster.lease import Lease
from gateway.cluster.locks import HeldLock, LockTimeout, acquire, keep, release, sync_redis_lock
from gateway.cluster.node import embedded_index_dir, node_id
from gateway.config import Config
from gateway.memory.files import store as memory_store

log = logging.getLogger("kith.cluster")
Step = Callable[[], Awaitable[None] | None]
LEASE_NAME = "scheduler"


async def _call(step: Step | None, what: str) -> None:
    if step is None:
        return
    try:
        result = step()
        if inspect.isawaitable(result):
            await result
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("leader role: %s failed", what)


class Cluster:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.enabled = config.cluster.enabled
        self.node_id = node_id(config)
        self.lease: Lease | None = None
        self._roles: list[tuple[Step, Step | None]] = []
        self._leading = False
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._redis: Redis | None = None
        self._sync: sync_redis.Redis | None = None
        self._file_lock: memory_store.CrossHostLock | None = None
        self.changes = 0  # leadership gained or lost (tests, logs)
        self._starting: set[asyncio.Future[Any]] = set()  # leader starts and lock releases in flight

    # ------------------------------------------------------------------------------ lifecycle

    async def start(self, redis: Redis | None, *, lead: bool) -> None:
        """``redis``: the bus's client; ``lead``: this process may run leader work at all (the
        daemon; not ``kith worker`` or read-only commands)."""
        if not self.enabled:
            self._leading = lead
            return
        if redis is None:
            raise RuntimeError("a clustered gateway needs the job bus's Redis")
        self._redis = redis
        cfg = self.config.cluster
        self._sync = _sync_client(self.config)
        sync = self._sync
        prefix = f"{self.config.bus.prefix}:lock:file:"
        self._file_lock = lambda key: sync_redis_lock(sync, prefix + key, cfg.lock_ttl_s, wait=cfg.lock_ttl_s * 2)
        memory_store.set_cross_host_lock(self._file_lock)
        if lead:
            self.lease = Lease(redis, LEASE_NAME, cfg.lease_ttl_s, holder=self.node_id, prefix=self.config.bus.prefix)
            self._task = asyncio.create_task(self._hold(), name="cluster:lease")
        log.info("cluster node %s%s", self.node_id, " (may lead)" if lead else "")
        if self.config.state.url is None:
            log.warning("cluster on the SQLite state file: every node must run on this machine (set state.url to a "
                        "PostgreSQL database for nodes on several machines)")
        if self.config.memory.qdrant_url is None:
            log.warning("cluster without a Qdrant server: this node keeps its own index in %s, which misses what "
                        "other nodes index until it restarts (set memory.qdrant_url)", embedded_index_dir(self.config))

    async def close(self) -> None:
        """Stop leader work, hand the lease over at once (no TTL wait for the next node)."""
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._starting:
            await asyncio.gather(*self._starting, return_exceptions=True)
        if self._leading:
            await self._step_down("shutting down")
        if self.lease is not None and self.lease.token is not None:
            with contextlib.suppress(RedisError, OSError):
                await self.lease.release()
        if self._file_lock is not None and memory_store.cross_host_lock() is self._file_lock:
            memory_store.set_cross_host_lock(None)
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    # ------------------------------------------------------------------------------ leadership

    def is_leader(self) -> bool:
        if not self.enabled:
            return self._leading
        return self._leading and self.lease is not None and self.lease.held()

    @property
    def token(self) -> int | None:
        """The fencing token of this node's current lease (None: not the leader; 0: one node)."""
        if not self.enabled:
            return 0 if self._leading else None
        return self.lease.token if self.is_leader() and self.lease is not None else None

    def on_leader(self, start: Step, stop: Step | None = None) -> None:
        """Run ``start`` whenever this node becomes the leader and ``stop`` when it stops being it;
        when it leads already, ``start`` is scheduled now."""
        self._roles.append((start, stop))
        if self._leading:
            self._begin(start)  # at once: with one node, the work starts exactly where it did before

    def _begin(self, start: Step) -> None:
        """Run ``start``; a coroutine runs as a task of its own, so a long start never holds up the
        lease's renewals."""
        try:
            result = start()
        except Exception:
            log.exception("leader role: start failed")
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    def _step_up(self) -> None:
        self._leading = True
        self.changes += 1
        assert self.lease is not None
        log.info("node %s leads (scheduler lease, fencing token %s)", self.node_id, self.lease.token)
        for start, _ in list(self._roles):
            self._begin(start)

    async def _step_down(self, why: str) -> None:
        if not self._leading:
            return
        self._leading = False
        self.changes += 1
        log.log(logging.WARNING if self.enabled else logging.DEBUG, "node %s no longer leads: %s", self.node_id, why)
        for _, stop in reversed(self._roles):
            await _call(stop, "stop")

    async def _hold(self) -> None:
        """Try for the lease every third of its TTL; renew it at that pace while held; step down the
        moment it is refused or its local validity ends (a renewal that hangs counts as lost)."""
        lease = self.lease
        assert lease is not None
        interval = lease.ttl / 3
        while not self._stopping.is_set():
            try:
                if lease.token is None:
                    if await asyncio.wait_for(lease.acquire(), timeout=interval) and not self._leading:
                        self._step_up()
                elif not await asyncio.wait_for(lease.renew(), timeout=max(lease.remaining(), 0.01)):
                    await self._step_down("the lease was taken or ran out")
            except (RedisError, OSError, TimeoutError) as exc:
                log.warning("scheduler lease: %s", exc or type(exc).__name__)
            if self._leading and not lease.held():
                lease.forget()
                await self._step_down("the lease could not be renewed in time")
            pause = min(interval, lease.remaining()) if self._leading else interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=max(pause, 0.01))

    # ---------------------------------------------------------------------------------- locks

    @contextlib.asynccontextmanager
    async def turn_lock(self, scope: str) -> AsyncIterator[HeldLock | None]:
        """One turn of ``scope`` at a time across every node; nothing at all with one node."""
        if not self.enabled or self._redis is None:
            yield None
            return
        cfg, redis = self.config.cluster, self._redis
        try:
            held = await acquire(redis, f"{self.config.bus.prefix}:lock:turn:{scope}", cfg.lock_ttl_s,
                                 wait=cfg.turn_lock_wait_s)
        except (RedisError, OSError, LockTimeout) as exc:
            # Answering beats refusing: without Redis (or behind a turn that will not end) the turn
            # runs unserialised, which can only matter if the person writes to two nodes at once.
            log.warning("turn of %s runs without the cross-node lock: %s", scope, exc)
            yield None
            return
        renewer = keep(redis, held, cfg.lock_ttl_s)
        try:
            yield held
        finally:
            held.done = True
            renewer.cancel()
            # Released off the turn's path: the reply need not wait for one more round trip (the
            # person's next message finds it free; until then the key is still ours, checked by token).
            task = asyncio.create_task(release(redis, held, cfg.lock_ttl_s), name="lock:release")
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    @contextlib.contextmanager
    def file_lock(self, key: str) -> Iterator[HeldLock | None]:
        """A lock shared by every node for a check-then-write outside the guarded store (whose writes
        take their own); None with one node, where the caller's own serialisation is enough."""
        if not self.enabled or self._sync is None:
            yield None
            return
        with sync_redis_lock(self._sync, f"{self.config.bus.prefix}:lock:file:{key}", self.config.cluster.lock_ttl_s,
                             wait=self.config.cluster.lock_ttl_s * 2) as held:
            yield held


def _sync_client(config: Config) -> sync_redis.Redis:
    """A blocking client on the bus's server, for the guarded store (its writes are synchronous)."""
    cfg = config.bus
    if cfg.sentinel_master:
        from redis.sentinel import Sentinel

        hosts = [(h or item, int(p or 26379)) for item in cfg.sentinels for h, _, p in [item.rpartition(":")]]
        kwargs: dict[str, Any] = {}
        if cfg.url is not None:
            password = sync_redis.connection.parse_url(cfg.url.get_secret_value()).get("password")
            if password:
                kwargs["password"] = password
        skw = {"password": cfg.sentinel_password.get_secret_value()} if cfg.sentinel_password else {}
        return Sentinel(hosts, sentinel_kwargs=skw, **kwargs).master_for(cfg.sentinel_master, decode_responses=True)
    assert cfg.url is not None  # config validation: cluster.enabled needs bus.url or Sentinel
    return sync_redis.Redis.from_url(cfg.url.get_secret_value(), decode_responses=True)
