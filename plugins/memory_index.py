"""Built-in plugin: keeps the memory index in step with the Markdown files, through the job bus.

Every guarded write reports ``(scope, file)``; this plugin turns that into a ``memory.index`` job, so
re-embedding never runs in a turn and survives a crash (the job is redelivered; the indexer is
idempotent by content hash). At startup each known root gets a ``memory.sync`` job that catches up
on edits made while the daemon was down. A link merge rebuilds the surviving user's scope and purges
the merged one. When the bus refuses a job the write is indexed in-process instead: never dropped.

While the memory service has paused indexing for lack of disk space, these jobs succeed at once and
the service keeps their work for later (``MemoryService`` replays it when space returns): failing
them instead would retry each job into the dead-letter queue during a pause longer than its backoff.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

from gateway.bus import BusError, JobContext, JobRegistry
from gateway.hookspecs import hookimpl
from gateway.memory.edit import forget
from gateway.memory.files.scopes import user_scope
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.memory.index")

def _job_id(kind: str, scope: str, rel: str = "") -> str:
    digest = hashlib.blake2b(f"{scope}\x00{rel}".encode(), digest_size=10).hexdigest()
    return f"{kind}:{digest}:{time.time_ns()}"


def _memory(ctx: JobContext) -> Any:
    memory = ctx.gateway.memory
    if memory is None:
        raise RuntimeError("the gateway's memory service is not running")
    return memory


async def index_file(ctx: JobContext, payload: dict[str, Any]) -> None:
    await _memory(ctx).indexing.index_file(str(payload["scope"]), str(payload["rel"]))


async def sync_scope(ctx: JobContext, payload: dict[str, Any]) -> None:
    await _memory(ctx).indexing.sync(str(payload["scope"]))


async def rebuild_scope(ctx: JobContext, payload: dict[str, Any]) -> None:
    await _memory(ctx).indexing.rebuild(str(payload["scope"]))


async def purge_scope(ctx: JobContext, payload: dict[str, Any]) -> None:
    await _memory(ctx).indexing.purge(str(payload["scope"]))


async def scrub_forgotten(ctx: JobContext, payload: dict[str, Any]) -> None:
    await forget.scrub(ctx.gateway, turns=bool(payload["turns"]), points=int(payload["points"]))


@hookimpl
def gateway_register_jobs(register: JobRegistry) -> None:
    # needs_index: a ``kith worker`` without the index (the daemon holds the embedded one) leaves
    # these queues to the daemon's in-process workers. Two index jobs at once per worker: they embed
    # on the process's one background thread, so more would only wait there, holding every worker
    # slot while a backlog of them builds (a reminder or any other job then waited behind it).
    register(index_file, name="memory.index", timeout=300, max_tries=5, needs_index=True, concurrency=4)
    register(sync_scope, name="memory.sync", timeout=3600, max_tries=3, needs_index=True)
    register(rebuild_scope, name="memory.rebuild", timeout=3600, max_tries=3, needs_index=True)
    register(purge_scope, name="memory.purge", timeout=600, max_tries=3, needs_index=True)
    register(scrub_forgotten, name=forget.SCRUB_JOB, timeout=3600, max_tries=5, needs_index=True)


#: Enqueues in flight at once per gateway. A burst of writes (a thousand files edited at once, a
#: ``git pull``) otherwise opens one Redis connection per write and runs the client's pool out
#: ("Too many connections"), which sent those files to in-process indexing (kith bench schedule).
ENQUEUE_CONCURRENCY = 16
_ENQUEUING: StashKey[asyncio.Semaphore] = StashKey()


async def _enqueue_index(gateway: Services, scope: str, rel: str) -> None:
    bus = gateway.bus
    limit = gateway.stash.get(_ENQUEUING)
    if limit is None:
        limit = gateway.stash[_ENQUEUING] = asyncio.Semaphore(ENQUEUE_CONCURRENCY)
    try:
        if bus is None:
            raise BusError("the job bus is not running")
        async with limit:
            await bus.enqueue("memory.index", {"scope": scope, "rel": rel}, job_id=_job_id("index", scope, rel))
    except BusError as exc:
        if gateway.memory is not None and not gateway.memory.detached:
            log.warning("re-indexing %s %s in-process: %s", scope, rel, exc)
            gateway.memory.indexing.enqueue_local(scope, rel)
        else:
            # No index here and no bus: the daemon's startup sync picks the file up (content hashes).
            log.error("could not queue re-indexing of %s %s: %s", scope, rel, exc)


@hookimpl
async def gateway_startup(gateway: Services) -> None:
    memory, bus = gateway.memory, gateway.bus
    if memory is None or bus is None:
        return
    loop = asyncio.get_running_loop()

    def sink(scope: str, rel: str) -> None:
        # Writes run on the loop or in worker threads; the enqueue always runs on the loop.
        def start() -> None:
            gateway.spawn(_enqueue_index(gateway, scope, rel), name="memory:enqueue-index")

        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            start()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(start)

    memory.indexing.index_sink = sink
    if not gateway.run_jobs or memory.detached:
        return
    if gateway.cluster.enabled and memory.loader.embedded:
        # Several nodes, each with an index of its own (no Qdrant server): a bus job would sync
        # whichever node took it, so each node catches its own index up from the Markdown here.
        for scope in memory.stores.known_scopes():
            memory.indexing.enqueue_sync(scope)
        return

    async def sync_all() -> None:
        for scope in memory.stores.known_scopes():
            try:
                await bus.enqueue("memory.sync", {"scope": scope}, job_id=_job_id("sync", scope))
            except BusError as exc:  # e.g. redis refusing writes on a full disk: catch up in-process
                log.warning("startup sync of %s in-process: %s", scope, exc)
                memory.indexing.enqueue_sync(scope)

    if not gateway.cluster.enabled:
        await sync_all()
    else:
        # One shared index (a Qdrant server): the scheduler lease's holder catches it up, once, not
        # every node at its start.
        gateway.cluster.on_leader(sync_all)


@hookimpl
async def gateway_users_merged(gateway: Services, into: str, source: str) -> None:
    bus = gateway.bus
    if bus is None:
        return
    await bus.enqueue("memory.rebuild", {"scope": user_scope(into)}, job_id=_job_id("rebuild", user_scope(into)))
    await bus.enqueue("memory.purge", {"scope": user_scope(source)}, job_id=_job_id("purge", user_scope(source)))
