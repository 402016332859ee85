"""MemoryService: what the gateway holds. Stores per root, live indexing, scoped recall.

Scopes name roots (see ``gateway.memory.files.scopes``): ``user:<id>``, ``channel:<channel>-<conversation>``,
``persona:<name>``.
Every guarded write reports its file through the store's ``on_write``; a worker task drains those
into ``index_path`` off the event loop. Embedding and Qdrant calls always run in worker threads,
so a recall never stalls the loop that serves other conversations.

Disk space: below ``memory.min_free_mb`` free on the embedded index's filesystem, indexing pauses
(a write there can SIGBUS the process, see ``gateway.util.diskspace``). Index work that arrives meanwhile
(bus jobs, local re-indexes, startup syncs) is kept in ``_pending`` and the job itself succeeds, so a
long pause never burns a job's delivery cap into the dead-letter queue; a task re-checks free space
every ``memory.disk_check_s`` and replays the kept work when space returns. Work kept in memory is
lost with the process, which is fine: the Markdown files are the source and every start syncs them.
When there is no room to open the index at start, the gateway starts without it (recall answers
nothing) and opens it on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.cluster.node import embedded_index_dir
from gateway.config import Config, plugin_allowed
from gateway.memory.files.scopes import ScopeError, channel_scope, known_scopes, root_for, user_scope
from gateway.memory.files.session_log import TurnRecord
from gateway.memory.files.store import MemoryStore
from gateway.memory.search.chunk import Chunk, turn_chunk
from gateway.memory.search.index import IndexBusyError, VectorIndex, open_index
from gateway.memory.search.indexer import Indexer, IndexReport
from gateway.memory.search.recall import Hit, RecallSettings, recall
from gateway.memory.search.sparse import SparseEncoder
from gateway.turn.gate import TURNS
from gateway.util.diskspace import MB, DiskFloor, LowDiskSpaceError, Space

if TYPE_CHECKING:  # numpy and onnxruntime: imported by the load (_open), off the start-up path
    from gateway.memory.search.embed import Embedder

log = logging.getLogger(__name__)

__all__ = ["MemoryService", "ScopeError", "channel_scope", "user_scope"]

# Stages that use the index on every turn: with both denied, the daemon loads it on first use only.
_EVERY_TURN = ("plugins.recall", "plugins.memory_index")
LOAD_RETRY_S = (1.0, 2.0, 5.0, 15.0, 60.0)  # waits between attempts when background loading failed

_LAST_TURNS = 4096  # sessions whose previous turn is remembered for dense context

IndexSink = Callable[[str, str], None]
# Index work, queued and kept while paused: (operation, scope, file); file is "" for whole-scope work.
Op = tuple[str, str, str]
FILE, SYNC, REBUILD, PURGE = "file", "sync", "rebuild", "purge"


def recall_threads(embedded: bool, cpus: int | None = None) -> int:
    """Threads that run recall queries. An embedded index's query is CPU work (the query's embedding
    and the search): it gets the cores but one, which the event loop keeps. Two on two cores took
    turns from the loop: with 50 clients one thread served 1.09-1.15x the turns/s, each query in
    0.6-0.74x the wall time. A Qdrant server's query mostly waits on the network: two at least."""
    if cpus is None:  # the cores this process may run on (a container's share), not the host's
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
    return max(1, cpus - 1) if embedded else max(2, cpus - 1)


class MemoryService:
    def __init__(self, config: Config, *, index: VectorIndex | None = None, detach_if_busy: bool = False) -> None:
        """``detach_if_busy``: when another process holds the embedded index (``kith worker`` next to
        the daemon), run without one: writes still go through the guarded store and are reported to
        the index sink (the job bus), recall raises ``IndexBusyError``."""
        self.config = config
        self.detach_if_busy = detach_if_busy
        self.detached = False
        self.index_sink: IndexSink | None = None
        # Writes are indexed as they happen unless the plugin that keeps the index is switched off
        # (``plugins.deny``, the "core" gateway): then nothing embeds per turn. A start-up sync or
        # ``kith memory reindex`` still brings the index up to date from the files.
        self.live_indexing = plugin_allowed("plugins.memory_index", config.plugins)
        self.mem = config.memory
        self.data_dir = Path(config.data_dir)
        self.settings = RecallSettings(
            dense_weight=self.mem.dense_weight,
            sparse_weight=self.mem.sparse_weight,
            half_life_days=self.mem.recency_half_life_days,
            recency_weight=self.mem.recency_weight,
            candidates=self.mem.recall_candidates,
            neighbor_weight=self.mem.neighbor_weight,
            neighbor_window_s=self.mem.neighbor_window_s,
            speaker_weight=self.mem.speaker_weight,
            date_weight=self.mem.date_weight,
            diversity=self.mem.session_diversity,
        )
        self._index = index
        self._embedder: Embedder | None = None
        self._indexer: Indexer | None = None
        self._stores: dict[str, MemoryStore] = {}
        self._queue: asyncio.Queue[Op] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None
        self._last_turn: dict[tuple[str, str], TurnRecord] = {}  # (scope, session) -> previous turn
        self.counters = {"recalls": 0, "indexed_files": 0, "embedded_chunks": 0, "index_errors": 0}
        # Own thread pools: indexing is CPU-heavy and long (a big file under load takes seconds), so
        # it runs one at a time on its own thread and can never starve recall, or any other
        # ``to_thread`` call on the turn path, of the default pool's few threads.
        self._index_pool: ThreadPoolExecutor | None = None
        self._query_pool: ThreadPoolExecutor | None = None
        # The floor guards the embedded index (a Qdrant server minds its own disk); it is watched
        # either way, so /healthz tells about a data directory running out of space.
        self.embedded = self.mem.qdrant_url is None and index is None
        self.index_root = embedded_index_dir(config)  # <data_dir>/qdrant; per node in a cluster
        watched = self.index_root if self.embedded else self.data_dir
        self.floor = DiskFloor(watched, self.mem.min_free_mb * MB)
        self.low_space: Space | None = None  # the last measurement under the floor, None when fine
        self.paused_since: float | None = None  # monotonic time indexing paused at, None = running
        self._pending: dict[Op, None] = {}  # ordered set: replayed in arrival order on resume
        self._watch: asyncio.Task[None] | None = None
        self._open_failed = False
        self._ready = asyncio.Event()  # set once start-up loading has ended, whatever its outcome
        self._loader: asyncio.Task[None] | None = None
        self.load_error = ""  # why background loading failed ("" = it did not)
        self._deferred = False  # start() left loading to the first use (no stage needs it every turn)
        self._load_pending = False  # start() left loading to the gateway, once it serves (begin_loading)

    # -------------------------------------------------------------------------------- lifecycle

    async def start(self, *, background: bool = False) -> None:
        """Load the embedder and open the index. ``background=True`` (the daemon) returns at once and
        loads on its own task: the gateway answers while it loads, turns meanwhile go without recall
        (``ready`` is False; the recall stage notes it in the turn's context record) and index work
        waits for it (docs/memory.md, "Start-up")."""
        self._loop = asyncio.get_running_loop()
        self._index_pool = ThreadPoolExecutor(1, thread_name_prefix="kith-index")
        self._query_pool = ThreadPoolExecutor(recall_threads(self.embedded), thread_name_prefix="kith-recall")
        if background and not any(plugin_allowed(p, self.config.plugins) for p in _EVERY_TURN):
            # No stage recalls or indexes per turn (the "core" gateway, memory stages denied): the
            # embedder (~65 MB) and the index are loaded by the first thing that needs them, if any.
            self._deferred = True
            log.info("memory: recall and live indexing are off; the embedder and index load on first use")
        elif background:
            # Loading holds the GIL for most of a second (imports, the model's graph): the gateway
            # begins it once it serves and has answered a first turn (``begin_loading``), so neither
            # shares the CPU with it. Index work that arrives before then waits (``wait_ready``).
            self._load_pending = True
        else:
            await self._load(background=False)

    async def wait_ready(self) -> None:
        """Until background loading has ended. Index work that arrives meanwhile (start-up syncs,
        bus jobs, imports) waits here instead of failing on an index that is not open yet."""
        if self._ready.is_set():
            return
        if self._loader is None and self._deferred:
            self._start_loader()
        if self._loader is not None or self._load_pending:
            await self._ready.wait()

    def begin_loading(self) -> None:
        """Begin the background load ``start(background=True)`` left to the gateway (a no-op when it
        runs already, or when nothing needs it every turn and it waits for a first use instead)."""
        if self._loader is None and self._load_pending:
            self._start_loader()

    def abandon_load(self) -> None:
        """The gateway stops before it began loading: whoever waits for the index is let go (their
        work fails and is retried at the next start) instead of holding up the shutdown."""
        if self._load_pending:
            self._load_pending = False
            self.load_error = "the gateway stopped before loading the embedder and the index"
            self._ready.set()

    def _start_loader(self) -> None:
        self._load_pending = False
        self._loader = asyncio.create_task(self._load(background=True), name="memory:load")

    @property
    def ready(self) -> bool:
        """The embedder is loaded and the index open (or known to be unavailable): recall can run."""
        return self._ready.is_set()

    async def _load(self, *, background: bool) -> None:
        started = time.monotonic()
        try:
            attached = await self._open()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not background:
                raise
            # The daemon is up and answering: a model or index that does not load costs recall,
            # not the service. /healthz names it, and loading is tried again with a backoff: the
            # cause is often passing (out of file descriptors under a connection flood, a full disk).
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.warning("memory: loading the embedder or opening the index failed (%s); turns are answered"
                        " without recall, trying again in %.0fs", self.load_error, LOAD_RETRY_S[0])
            self._ready.set()
            attached = await self._load_again()
        finally:
            self._ready.set()
        if background:
            log.info("memory: ready after %.2fs in the background", time.monotonic() - started)
        if not attached:
            return
        self._worker = asyncio.create_task(self._drain(), name="memory:indexer")
        if self.floor.min_free_bytes and not self.load_error:
            self._watch = asyncio.create_task(self._watch_disk(), name="memory:disk-watch")

    async def _load_again(self) -> bool:
        """Retry loading until it works (backoff up to a minute; one log line per attempt). Index
        work that arrives meanwhile fails and is retried by the bus; recall stays off until then."""
        attempt = 0
        while True:
            await asyncio.sleep(LOAD_RETRY_S[min(attempt, len(LOAD_RETRY_S) - 1)])
            attempt += 1
            try:
                attached = await self._open()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.load_error = f"{type(exc).__name__}: {exc}"
                log.warning("memory: loading failed again (%s; attempt %d)", self.load_error, attempt + 1)
                continue
            self.load_error = ""
            log.info("memory: loaded on attempt %d; recall is on", attempt + 1)
            return attached

    async def _open(self) -> bool:
        """The embedder and the index; False when running detached (another process holds it)."""
        if self._embedder is None:  # a retry after the index failed to open keeps the loaded model
            from gateway.memory.search.embed import load_embedder

            self._embedder = await asyncio.to_thread(
                load_embedder, self.mem.embedding_model, threads=self.mem.embedding_threads
            )
        if self._index is None:
            try:
                self._index = await asyncio.to_thread(self._open_index, self._embedder)
            except IndexBusyError:
                if not self.detach_if_busy:
                    raise
                log.info("memory: the index is held by the running gateway; re-indexing goes through the bus")
                self.detached = True
                return False
            except LowDiskSpaceError as exc:
                if self.detach_if_busy:
                    # A `kith worker` cannot tell whether the daemon holds the index without opening
                    # it: it leaves the index jobs on the bus (kept there, not here) to whoever has it.
                    log.warning("memory: not opening the index (%s); index jobs are left to the daemon",
                                exc.space.describe())
                    self.detached = True
                    return False
                # Opening would replay the write-ahead log into memory-mapped files: on a full disk
                # that is a SIGBUS at every start. Start without the index; the watch opens it later.
                self._pause(exc.space)
                log.warning("memory: the index is not opened (%s); turns are answered without recall"
                            " until space returns", exc.space.describe())
        if self._index is not None:
            self._indexer = Indexer(self._index, self._embedder, SparseEncoder(avg_len=self.mem.bm25_avg_len))
        return True

    def _open_index(self, embedder: Embedder) -> VectorIndex:
        key = self.mem.qdrant_api_key.get_secret_value() if self.mem.qdrant_api_key else None
        if self.embedded:
            self.floor.require("opening the memory index")  # before the lock file and directory
            # Two processes creating a new embedded index at once (two ``kith worker`` started
            # together) would race half-way through its files: opening is serialised, so the second
            # finds it created and locked by the first (IndexBusyError) instead.
            lock_dir = self.index_root
            lock_dir.mkdir(parents=True, exist_ok=True)
            with open(lock_dir / ".open.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                return self._open_index_unlocked(embedder, key)
        return self._open_index_unlocked(embedder, key)

    def _open_index_unlocked(self, embedder: Embedder, key: str | None) -> VectorIndex:
        return open_index(
            path=str(self.index_root / f"edge-{embedder.name}"),
            url=self.mem.qdrant_url,
            api_key=key,
            dim=embedder.dim,
            collection=f"kith_memory_{embedder.name}".replace("-", "_"),
            search_threads=self.mem.search_threads,
            floor=self.floor if self.embedded else None,
        )

    async def close(self) -> None:
        self.index_sink = None
        self.abandon_load()
        if self._loader is not None:
            # Loading runs in worker threads that cannot be interrupted: wait for it, so the index
            # it opens is closed below (an abandoned shard keeps its write-ahead-log lock). A load
            # that failed and waits to try again is stopped instead of waited for.
            if self.load_error:
                self._loader.cancel()
            await asyncio.gather(self._loader, return_exceptions=True)
            self._loader = None
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self._worker is not None:
            await self.drain()
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        self._loop = None  # writes after close are still guarded, just no longer indexed live
        if self._pending:
            log.info("memory: %d index operations kept during the disk-space pause are left to the next"
                     " start's sync of every root (the Markdown files are their source)", len(self._pending))
        if self._index is not None:
            await self._indexing(self._index.close)
        for pool in (self._index_pool, self._query_pool):
            if pool is not None:
                pool.shutdown(wait=False)
        self._index_pool = self._query_pool = None

    async def _indexing(self, fn: Callable[..., Any], *args: Any) -> Any:
        await self.wait_ready()
        # No pool = not started (or closed): the default pool does it.
        return await asyncio.get_running_loop().run_in_executor(self._index_pool, functools.partial(fn, *args))

    async def index_file(self, scope: str, rel: str) -> IndexReport:
        """Re-index one file of one scope on the indexing thread (what ``memory.index`` jobs call).
        While indexing is paused the work is kept for later and an empty report returned."""
        # Index work runs at background priority and yields to turns (gateway/turn/gate.py). A turn
        # that waits for it (/forget, /remember: the next recall must see the change) needs no core
        # meanwhile: holding the gate, it made the indexer wait out its longest pause for the very
        # turn waiting on it (1.5 s a /forget, past the command's 5 s deadline on a loaded machine).
        with TURNS.waiting():
            return await self._guarded((FILE, scope, rel), self._index_path_uncounted, scope, rel)

    async def _guarded(self, op: Op, fn: Callable[..., IndexReport | None], *args: Any) -> IndexReport:
        """Run index work on the indexing thread unless indexing is paused; work that finds (or
        hits) low space is kept and replayed on resume instead of failing its caller (a bus job
        that failed would be retried into the dead-letter queue during a long pause)."""
        if self.paused:
            self._keep(op)
            return IndexReport()
        try:
            report = await self._indexing(fn, *args)
        except LowDiskSpaceError as exc:
            self._pause(exc.space)
            self._keep(op)
            return IndexReport()
        if report is None:
            return IndexReport()
        self._count(report)
        return report

    async def drain(self) -> None:
        """Wait until every queued re-index has run (tests, shutdown, benchmarks)."""
        await asyncio.sleep(0)  # let enqueues scheduled from worker threads land first
        await self._queue.join()

    # ----------------------------------------------------------------------------------- stores

    def root_for(self, scope: str) -> Path:
        return root_for(self.data_dir, scope)

    def store_for(self, scope: str) -> MemoryStore:
        if scope not in self._stores:
            self._stores[scope] = MemoryStore(
                self.root_for(scope),
                max_file_bytes=self.mem.max_file_bytes,
                on_write=lambda rel, scope=scope: self._enqueue(scope, rel),
            )
        return self._stores[scope]

    def store_for_user(self, user_id: str) -> MemoryStore:
        return self.store_for(user_scope(user_id))

    def store_for_channel(self, key: str) -> MemoryStore:
        """``key`` is a conversation key like ``telegram:-100123``."""
        return self.store_for(channel_scope(key))

    def store_for_persona(self, name: str) -> MemoryStore:
        return self.store_for(f"persona:{name}")

    # --------------------------------------------------------------------------------- indexing

    def _enqueue(self, scope: str, rel: str) -> None:
        # on_write may fire in any thread (writes often run in asyncio.to_thread).
        if not self.live_indexing:
            return
        if self.index_sink is not None:
            self.index_sink(scope, rel)
            return
        self.enqueue_local(scope, rel)

    def enqueue_local(self, scope: str, rel: str) -> None:
        """Re-index on this process's own indexer task (no bus, or the bus refused the job)."""
        if self.live_indexing:
            self.enqueue_op((FILE, scope, rel))

    def enqueue_sync(self, scope: str) -> None:
        """Catch a whole root up on this process's indexer task (startup sync without a bus)."""
        self.enqueue_op((SYNC, scope, ""))

    def enqueue_op(self, op: Op) -> None:
        if self._loop is None or self._loop.is_closed() or self.detached:
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._queue.put_nowait(op)
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, op)

    async def _drain(self) -> None:
        while True:
            op = await self._queue.get()
            try:
                await self._run(op)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.counters["index_errors"] += 1
                log.exception("memory: %s of %s %s failed", *op)
            finally:
                self._queue.task_done()

    async def _run(self, op: Op) -> None:
        kind, scope, rel = op
        if kind == FILE:
            await self.index_file(scope, rel)
        elif kind == SYNC:
            await self.sync(scope)
        elif kind == REBUILD:
            await self.rebuild(scope)
        elif kind == PURGE:
            await self.purge(scope)
        else:
            raise ValueError(f"unknown index operation {kind!r}")

    def index_path(self, scope: str, rel: str) -> IndexReport:
        """Re-index one file of one scope (blocking). The seam a job-bus handler can call."""
        report = self._index_path_uncounted(scope, rel)
        self._count(report)
        return report

    def _index_path_uncounted(self, scope: str, rel: str) -> IndexReport:
        # Live work (a write reported it): at background priority, in slices (see indexer.py).
        return self._require_indexer().index_path(scope, self.store_for(scope), rel, background=True)

    async def index_turn(
        self,
        *,
        scope: str,
        turn_id: str,
        session_id: str,
        channel: str,
        speaker: str,
        text: str,
        timestamp: datetime,
    ) -> None:
        """Index one transcript turn now, as its own unit (the session log remains its source)."""
        rec = TurnRecord(
            turn_id=turn_id, session_id=session_id, channel=channel, speaker=speaker, text=text, timestamp=timestamp
        )
        await self.index_turns(scope, [rec])

    async def index_turns(self, scope: str, records: Sequence[TurnRecord]) -> IndexReport:
        """Batch form of ``index_turn`` (imports, benchmarks): one embedding call for all of them."""
        self.root_for(scope)
        chunks = []
        for rec in records:
            ts = rec.timestamp
            rec = replace(rec, timestamp=ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC))
            # The previous turn of the session gives the dense vector its conversational context.
            chunks.append(turn_chunk(rec, self._last_turn.pop((scope, rec.session_id), None)))
            self._last_turn[(scope, rec.session_id)] = rec  # re-inserted: dict order = recency
            if len(self._last_turn) > _LAST_TURNS:
                del self._last_turn[next(iter(self._last_turn))]
        return await self.index_chunks(scope, chunks)

    async def index_chunks(self, scope: str, chunks: Sequence[Chunk]) -> IndexReport:
        """Index chunks that exist in no file (imports, benchmarks): nothing could replay them, so
        while indexing is paused this raises ``LowDiskSpaceError`` instead of keeping them."""
        await self.wait_ready()
        if self.paused:
            raise self._paused_error("indexing")
        try:
            report = await self._indexing(self._require_indexer().index_chunks, scope, chunks)
        except LowDiskSpaceError as exc:
            self._pause(exc.space)
            raise
        self._count(report)
        return report

    async def sync(self, scope: str) -> IndexReport:
        """Incremental pass over a root (startup catch-up after edits made while stopped)."""
        self.root_for(scope)
        if not self.paused:
            await asyncio.to_thread(self.store_for(scope).remove_stale_temp_files)
        return await self._guarded((SYNC, scope, ""), self._scope_work, "sync", scope)

    async def reindex(self, user_id: str | None = None) -> dict[str, IndexReport]:
        """Rebuild from the files: one user's scope, or every root under the data directory.
        An operator asked for it now: while indexing is paused this raises ``LowDiskSpaceError``."""
        scopes = [user_scope(user_id)] if user_id else self.known_scopes()
        await self.wait_ready()
        if self.paused:
            raise self._paused_error("rebuilding the memory index")
        out = {}
        try:
            for scope in scopes:
                out[scope] = await self._indexing(self._require_indexer().rebuild, scope, self.store_for(scope))
                self._count(out[scope])
            await self._indexing(self._require_index().optimize)
        except LowDiskSpaceError as exc:
            self._pause(exc.space)
            for scope in scopes:
                self._keep((REBUILD, scope, ""))  # finished by itself when space returns
            raise
        return out

    async def rebuild(self, scope: str) -> IndexReport:
        """Drop and rebuild one scope's index from its files (after a merge moved them in)."""
        if not self.root_for(scope).exists():
            # Erased (or merged away) since the rebuild was queued: opening its store would create
            # the person's folder again after `kith users delete` removed it. Nothing is left to index.
            await self.purge(scope)
            return IndexReport()
        return await self._guarded((REBUILD, scope, ""), self._scope_work, "rebuild", scope)

    async def purge(self, scope: str) -> None:
        """Forget everything indexed for a scope (a merged-away user); its files are already gone."""
        self.root_for(scope)
        await self._guarded((PURGE, scope, ""), self._scope_work, "purge", scope)
        self._stores.pop(scope, None)

    async def compact(self) -> None:
        """Rewrite the index files so purged points are gone from the disk, not only from searches."""
        await self.wait_ready()
        if self._index is not None:
            await self._indexing(self._index.compact)

    def _scope_work(self, kind: str, scope: str) -> IndexReport | None:
        """Whole-root work on the indexing thread (blocking)."""
        indexer = self._require_indexer()
        if kind == PURGE:
            indexer.forget_scope(scope)
            self._require_index().delete_scope(scope)
            return None
        if kind == SYNC:
            # The start-up catch-up runs while turns are served: background priority, like live work.
            return indexer.sync(scope, self.store_for(scope), background=True)
        return indexer.rebuild(scope, self.store_for(scope))

    # ------------------------------------------------------------------------------- disk space

    @property
    def paused(self) -> bool:
        """Indexing is paused for lack of disk space (index work is kept for later)."""
        return self.paused_since is not None

    def _pause(self, space: Space) -> None:
        self.low_space = space
        if self.paused_since is None:
            self.paused_since = time.monotonic()
            # Logged once per pause, not per write: a busy gateway would log every turn otherwise.
            log.warning("memory: indexing paused: %s; index work is kept and resumes by itself when"
                        " space returns (checked every %gs)", space.describe(), self.mem.disk_check_s)

    def _paused_error(self, what: str) -> LowDiskSpaceError:
        return LowDiskSpaceError(self.low_space or self.floor.check(), what)

    def _keep(self, op: Op) -> None:
        self._pending[op] = None
        log.debug("memory: indexing paused; kept %s of %s %s for later", *op)

    async def _watch_disk(self) -> None:
        while True:
            await asyncio.sleep(self.mem.disk_check_s)
            try:
                await self.check_disk()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failing statvfs must not end the watch (and with it, resuming)
                log.exception("memory: checking free disk space failed")

    async def check_disk(self) -> None:
        """Measure free space now: pause indexing below the floor, resume (and replay the kept
        work) above it. The watch task calls this every ``memory.disk_check_s``."""
        space = await asyncio.to_thread(self.floor.check)
        if space.low:
            self.low_space = space
            if self.embedded and not self.detached:
                self._pause(space)
            return
        self.low_space = None
        if self.paused:
            await self._resume(space)

    async def _resume(self, space: Space) -> None:
        assert self._embedder is not None and self.paused_since is not None
        if self._index is None:  # started on a full disk: open the index now
            opening = asyncio.ensure_future(self._indexing(self._open_index, self._embedder))
            try:
                self._index = await asyncio.shield(opening)
            except asyncio.CancelledError:
                # close() cancelled the watch mid-open: let the open finish so close() can close the
                # shard (an abandoned one keeps its write-ahead-log lock until the process exits).
                with contextlib.suppress(Exception):
                    self._index = await opening
                raise
            except LowDiskSpaceError as exc:  # above the floor, but opening needs more (tmpfs)
                self.low_space = exc.space
                if not self._open_failed:
                    log.warning("memory: the index stays closed: %s", exc.space.describe())
                self._open_failed = True
                return
            except Exception:
                if not self._open_failed:  # once, not every disk check
                    log.exception("memory: opening the index after disk space returned failed; retrying"
                                  " every %gs", self.mem.disk_check_s)
                self._open_failed = True
                return
            self._open_failed = False
            self._indexer = Indexer(self._index, self._embedder, SparseEncoder(avg_len=self.mem.bm25_avg_len))
            # The startup catch-up never ran on this index: every root, after the kept work.
            for scope in self.known_scopes():
                self._keep((SYNC, scope, ""))
        paused_for = time.monotonic() - self.paused_since
        kept, self._pending = list(self._pending), {}
        self.paused_since = None
        log.info("memory: disk space is back (%.0f MB free); indexing resumed after %.1fs, replaying %d kept"
                 " index operations", space.free_bytes / MB, paused_for, len(kept))
        for op in kept:
            self.enqueue_op(op)

    def health_problems(self) -> list[str]:
        """Why memory is not at full service, for /healthz (empty when it is)."""
        if self.load_error:
            return [f"memory did not load (recall is off): {self.load_error}"]
        if self.paused:
            opened = "" if self._index is not None else " (the index is not open: recall is off)"
            why = self.low_space.describe() if self.low_space else "disk space is back, the index does not open yet"
            return [f"memory indexing paused{opened}: {why}; {len(self._pending)} index operations kept"]
        if self.low_space is not None:
            return [f"low disk space: {self.low_space.describe()}"]
        return []

    def known_scopes(self) -> list[str]:
        return known_scopes(self.data_dir)

    # ----------------------------------------------------------------------------------- recall

    async def recall(
        self,
        *,
        scope: str | Sequence[str],
        query: str,
        k: int,
        now: datetime | float | None = None,
        kinds: Sequence[str] = (),
        tz: str | tzinfo | None = None,
    ) -> list[Hit]:
        """Top ``k`` memories for ``query`` inside ``scope`` (a scope or a list of scopes); ``tz`` is
        the person's time zone, on whose calendar "yesterday" or "last summer" in the query is read."""
        scopes = [scope] if isinstance(scope, str) else list(scope)
        for s in scopes:
            self.root_for(s)
        if self._index is None and self.paused:
            return []  # started on a full disk without the index: answer without recall
        if self._deferred:
            await self.wait_ready()  # loaded on first use: this caller waits for it
        if not self._ready.is_set() or (self.load_error and self._index is None):
            return []  # still loading in the background (or it failed): answer without recall
        index, embedder, indexer = self._require_index(), self._require_embedder(), self._require_indexer()
        self.counters["recalls"] += 1
        return await asyncio.get_running_loop().run_in_executor(self._query_pool, functools.partial(
            recall,
            index,
            embedder,
            indexer.sparse,
            scopes=scopes,
            query=query,
            k=k,
            now=now,
            settings=self.settings,
            kinds=kinds,
            tz=tz,
        ))

    def stats(self) -> dict[str, Any]:
        index = self._index
        return {
            "backend": index.backend if index else None,
            "embedding_model": self.mem.embedding_model,
            "points": index.count() if index else 0,
            "queued": self._queue.qsize(),
            "paused": self.paused,
            "kept": len(self._pending),
            **self.counters,
        }

    @property
    def index(self) -> VectorIndex:
        """The vector index (benchmarks fill it directly; everything else goes through recall)."""
        return self._require_index()

    @property
    def embedder(self) -> Embedder:
        return self._require_embedder()

    @property
    def sparse(self) -> SparseEncoder:
        return self._require_indexer().sparse

    async def report(self) -> dict[str, Any]:
        """``stats()`` plus files, bytes and index points per root (``kith memory stats``)."""
        scopes: dict[str, Any] = {}
        for scope in self.known_scopes():
            files = await asyncio.to_thread(self.store_for(scope).files)
            scopes[scope] = {
                "files": len(files),
                "bytes": sum(f.size for f in files),
                "points": await asyncio.to_thread(self.scope_count, scope),
            }
        return {**self.stats(), "scopes": scopes}

    def scope_count(self, scope: str) -> int:
        if self._index is None and self.paused:
            return 0
        return self._require_index().count(scope)

    # -------------------------------------------------------------------------------- internals

    def _count(self, report: IndexReport) -> None:
        self.counters["indexed_files"] += report.files
        self.counters["embedded_chunks"] += report.embedded

    def _require_indexer(self) -> Indexer:
        if self.detached:
            raise IndexBusyError("this process runs without the memory index (the gateway holds it)")
        if self._indexer is None:
            if self.paused:
                raise self._paused_error("opening the memory index")
            raise RuntimeError("MemoryService.start() has not been awaited")
        return self._indexer

    def _require_index(self) -> VectorIndex:
        self._require_indexer()
        assert self._index is not None
        return self._index

    def _require_embedder(self) -> Embedder:
        self._require_indexer()
        assert self._embedder is not None
        return self._embedder
