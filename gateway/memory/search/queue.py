"""The index queue: every write re-indexed off the event loop, and the disk floor it pauses at.

Every guarded write reports its file (``Stores.subscribe(queue.on_write)``); the report goes to the
index sink when one is set (the job bus: one node indexes each file once) and otherwise onto this
process's own queue, which a worker task drains into the indexer. Index work runs one at a time on
its own thread at background priority (``gateway.turngate``), so it never starves recall or any
other ``to_thread`` call on the turn path.

Disk space: below ``memory.min_free_mb`` free on the embedded index's filesystem, indexing pauses
(``pause.IndexPause``). Index work that arrives meanwhile (bus jobs, local re-indexes, startup syncs)
is kept in ``_pending`` and the job itself succeeds, so a long pause never burns a job's delivery cap
into the dead-letter queue; a task re-checks free space every ``memory.disk_check_s`` and replays the
kept work when space returns. Work kept in memory is lost with the process, which is fine: the
Markdown files are the source and every start syncs them. When there was no room to open the index
at start, it is opened on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from gateway.memory.files.scopes import user_scope
from gateway.memory.files.session_log import TurnRecord
from gateway.memory.files.stores import Stores
from gateway.memory.search.chunk import Chunk, turn_chunk
from gateway.memory.search.indexer import IndexReport
from gateway.memory.search.loading import IndexLoader
from gateway.memory.search.pause import IndexPause
from gateway.turn.gate import TURNS
from gateway.util.diskspace import MB, DiskFloor, LowDiskSpaceError, Space

log = logging.getLogger(__name__)

_LAST_TURNS = 4096  # sessions whose previous turn is remembered for dense context

IndexSink = Callable[[str, str], None]
# Index work, queued and kept while paused: (operation, scope, file); file is "" for whole-scope work.
Op = tuple[str, str, str]
FILE, SYNC, REBUILD, PURGE = "file", "sync", "rebuild", "purge"


class IndexQueue:
    def __init__(self, loader: IndexLoader, stores: Stores, *, live: bool = True) -> None:
        """``live``: writes are indexed as they happen. Off when no stage keeps the index per turn
        (the "core" gateway): nothing embeds per turn, and a start-up sync or ``kith memory reindex``
        still brings the index up to date from the files."""
        self.loader = loader
        self.stores = stores
        self.pause: IndexPause = loader.pause
        self.live = live
        self.index_sink: IndexSink | None = None
        self.counters = {"indexed_files": 0, "embedded_chunks": 0, "index_errors": 0}
        self._queue: asyncio.Queue[Op] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[Op, None] = {}  # ordered set: replayed in arrival order on resume
        self._open_failed = False
        self._last_turn: dict[tuple[str, str], TurnRecord] = {}  # (scope, session) -> previous turn

    @property
    def floor(self) -> DiskFloor:
        return self.pause.floor

    @property
    def paused(self) -> bool:
        """Indexing is paused for lack of disk space (index work is kept for later)."""
        return self.pause.paused

    @property
    def kept(self) -> int:
        """Index operations kept during a pause, replayed when space returns."""
        return len(self._pending)

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    # -------------------------------------------------------------------------------- lifecycle

    def open(self) -> None:
        """Bind to the running loop and make the indexing thread (``close`` ends both)."""
        self._loop = asyncio.get_running_loop()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kith-index")

    def run(self) -> None:
        """Start the worker (and the disk watch): the loader opened the index and this process holds it."""
        self._worker = asyncio.create_task(self._drain(), name="memory:indexer")
        if self.floor.min_free_bytes and not self.loader.load_error:
            self._watch = asyncio.create_task(self._watch_disk(), name="memory:disk-watch")

    async def stop(self) -> None:
        """Stop watching, run what is queued, stop the worker; writes after this are still guarded,
        just no longer indexed live."""
        self.index_sink = None
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
        self._loop = None
        if self._pending:
            log.info("memory: %d index operations kept during the disk-space pause are left to the next"
                     " start's sync of every root (the Markdown files are their source)", len(self._pending))

    def close_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        self._pool = None

    async def on_index_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the indexing thread, once loading has ended."""
        await self.loader.wait_ready()
        # No pool = not started (or closed): the default pool does it.
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args))

    # ------------------------------------------------------------------------------ queueing

    def on_write(self, scope: str, rel: str) -> None:
        """The stores' report of a guarded write (any thread)."""
        if not self.live:
            return
        if self.index_sink is not None:
            self.index_sink(scope, rel)
            return
        self.enqueue_local(scope, rel)

    def enqueue_local(self, scope: str, rel: str) -> None:
        """Re-index on this process's own indexer task (no bus, or the bus refused the job)."""
        if self.live:
            self.enqueue_op((FILE, scope, rel))

    def enqueue_sync(self, scope: str) -> None:
        """Catch a whole root up on this process's indexer task (startup sync without a bus)."""
        self.enqueue_op((SYNC, scope, ""))

    def enqueue_op(self, op: Op) -> None:
        if self._loop is None or self._loop.is_closed() or self.loader.detached:
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._queue.put_nowait(op)
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, op)

    async def drain(self) -> None:
        """Wait until every queued re-index has run (tests, shutdown, benchmarks)."""
        await asyncio.sleep(0)  # let enqueues scheduled from worker threads land first
        await self._queue.join()

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

    # ------------------------------------------------------------------------------- the work

    async def index_file(self, scope: str, rel: str) -> IndexReport:
        """Re-index one file of one scope on the indexing thread (what ``memory.index`` jobs call).
        While indexing is paused the work is kept for later and an empty report returned."""
        # Index work runs at background priority and yields to turns (gateway/turn/gate.py). A turn
        # that waits for it (/forget, /remember: the next recall must see the change) needs no core
        # meanwhile: holding the gate, it made the indexer wait out its longest pause for the very
        # turn waiting on it (1.5 s a /forget, past the command's 5 s deadline on a loaded machine).
        with TURNS.waiting():
            return await self._guarded((FILE, scope, rel), self._index_path_uncounted, scope, rel)

    def index_path(self, scope: str, rel: str) -> IndexReport:
        """Re-index one file of one scope (blocking). The seam a job-bus handler can call."""
        report = self._index_path_uncounted(scope, rel)
        self._count(report)
        return report

    def _index_path_uncounted(self, scope: str, rel: str) -> IndexReport:
        indexer = self.loader.require_indexer()  # first: a process without the index says so (IndexBusyError)
        if not self.stores.root_for(scope).exists():
            # The person was erased (or merged away) after the write that queued this: their points are
            # purged with the scope, and opening the store would create their folder again.
            return IndexReport()
        # Live work (a write reported it): at background priority, in slices (see indexer.py).
        return indexer.index_path(scope, self.stores.store_for(scope), rel, background=True)

    async def index_turn(
        self, *, scope: str, turn_id: str, session_id: str, channel: str, speaker: str, text: str,
        timestamp: datetime,
    ) -> None:
        """Index one transcript turn now, as its own unit (the session log remains its source)."""
        rec = TurnRecord(
            turn_id=turn_id, session_id=session_id, channel=channel, speaker=speaker, text=text, timestamp=timestamp
        )
        await self.index_turns(scope, [rec])

    async def index_turns(self, scope: str, records: Sequence[TurnRecord]) -> IndexReport:
        """Batch form of ``index_turn`` (imports, benchmarks): one embedding call for all of them."""
        self.stores.root_for(scope)
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
        await self.loader.wait_ready()
        if self.paused:
            raise self.pause.error("indexing")
        try:
            report = await self.on_index_thread(self.loader.require_indexer().index_chunks, scope, chunks)
        except LowDiskSpaceError as exc:
            self.pause.pause(exc.space)
            raise
        self._count(report)
        return report

    async def sync(self, scope: str) -> IndexReport:
        """Incremental pass over a root (startup catch-up after edits made while stopped)."""
        root = self.stores.root_for(scope)
        if not self.paused and root.exists():  # (an erased person's folder is not created again)
            await asyncio.to_thread(self.stores.store_for(scope).remove_stale_temp_files)
        return await self._guarded((SYNC, scope, ""), self._scope_work, "sync", scope)

    async def reindex(self, user_id: str | None = None) -> dict[str, IndexReport]:
        """Rebuild from the files: one user's scope, or every root under the data directory.
        An operator asked for it now: while indexing is paused this raises ``LowDiskSpaceError``."""
        scopes = [user_scope(user_id)] if user_id else self.stores.known_scopes()
        await self.loader.wait_ready()
        if self.paused:
            raise self.pause.error("rebuilding the memory index")
        out = {}
        try:
            for scope in scopes:
                out[scope] = await self.on_index_thread(
                    self.loader.require_indexer().rebuild, scope, self.stores.store_for(scope)
                )
                self._count(out[scope])
            await self.on_index_thread(self.loader.require_index().optimize)
        except LowDiskSpaceError as exc:
            self.pause.pause(exc.space)
            for scope in scopes:
                self._keep((REBUILD, scope, ""))  # finished by itself when space returns
            raise
        return out

    async def rebuild(self, scope: str) -> IndexReport:
        """Drop and rebuild one scope's index from its files (after a merge moved them in)."""
        if not self.stores.root_for(scope).exists():
            # Erased (or merged away) since the rebuild was queued: opening its store would create
            # the person's folder again after `kith users delete` removed it. Nothing is left to index.
            await self.purge(scope)
            return IndexReport()
        return await self._guarded((REBUILD, scope, ""), self._scope_work, "rebuild", scope)

    async def purge(self, scope: str) -> None:
        """Forget everything indexed for a scope (a merged-away user); its files are already gone."""
        self.stores.root_for(scope)
        await self._guarded((PURGE, scope, ""), self._scope_work, "purge", scope)
        self.stores.forget(scope)

    async def compact(self) -> None:
        """Rewrite the index files so purged points are gone from the disk, not only from searches."""
        await self.loader.wait_ready()
        index = self.loader.index_or_none
        if index is not None:
            await self.on_index_thread(index.compact)

    def _scope_work(self, kind: str, scope: str) -> IndexReport | None:
        """Whole-root work on the indexing thread (blocking)."""
        indexer = self.loader.require_indexer()
        if kind == PURGE:
            indexer.forget_scope(scope)
            self.loader.require_index().delete_scope(scope)
            return None
        if not self.stores.root_for(scope).exists():
            # Erased (or merged away) while this waited for the indexing thread: opening the store would
            # create the person's folder again after `kith users delete` removed it, and index nothing.
            return None
        if kind == SYNC:
            # The start-up catch-up runs while turns are served: background priority, like live work.
            return indexer.sync(scope, self.stores.store_for(scope), background=True)
        return indexer.rebuild(scope, self.stores.store_for(scope))

    async def _guarded(self, op: Op, fn: Callable[..., IndexReport | None], *args: Any) -> IndexReport:
        """Run index work on the indexing thread unless indexing is paused; work that finds (or
        hits) low space is kept and replayed on resume instead of failing its caller (a bus job
        that failed would be retried into the dead-letter queue during a long pause)."""
        if self.paused:
            self._keep(op)
            return IndexReport()
        try:
            report = await self.on_index_thread(fn, *args)
        except LowDiskSpaceError as exc:
            self.pause.pause(exc.space)
            self._keep(op)
            return IndexReport()
        if report is None:
            return IndexReport()
        self._count(report)
        return report

    def _count(self, report: IndexReport) -> None:
        self.counters["indexed_files"] += report.files
        self.counters["embedded_chunks"] += report.embedded

    # ------------------------------------------------------------------------------- disk space

    def _keep(self, op: Op) -> None:
        self._pending[op] = None
        log.debug("memory: indexing paused; kept %s of %s %s for later", *op)

    async def _watch_disk(self) -> None:
        while True:
            await asyncio.sleep(self.pause.check_s)
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
            self.pause.low_space = space
            if self.loader.embedded and not self.loader.detached:
                self.pause.pause(space)
            return
        self.pause.low_space = None
        if self.paused:
            await self._resume(space)

    async def _resume(self, space: Space) -> None:
        embedder = self.loader.embedder_loaded
        assert embedder is not None and self.paused
        if not self.loader.index_open:  # started on a full disk: open the index now
            opening = asyncio.ensure_future(self.on_index_thread(self.loader.open_index, embedder))
            try:
                index = await asyncio.shield(opening)
            except asyncio.CancelledError:
                # stop() cancelled the watch mid-open: let the open finish so the index can be
                # closed (an abandoned shard keeps its write-ahead-log lock until the process exits).
                with contextlib.suppress(Exception):
                    self.loader.attach(await opening)
                raise
            except LowDiskSpaceError as exc:  # above the floor, but opening needs more (tmpfs)
                self.pause.low_space = exc.space
                if not self._open_failed:
                    log.warning("memory: the index stays closed: %s", exc.space.describe())
                self._open_failed = True
                return
            except Exception:
                if not self._open_failed:  # once, not every disk check
                    log.exception("memory: opening the index after disk space returned failed; retrying"
                                  " every %gs", self.pause.check_s)
                self._open_failed = True
                return
            self._open_failed = False
            self.loader.attach(index)
            # The startup catch-up never ran on this index: every root, after the kept work.
            for scope in self.stores.known_scopes():
                self._keep((SYNC, scope, ""))
        kept, self._pending = list(self._pending), {}
        paused_for = self.pause.lift()
        log.info("memory: disk space is back (%.0f MB free); indexing resumed after %.1fs, replaying %d kept"
                 " index operations", space.free_bytes / MB, paused_for, len(kept))
        for op in kept:
            self.enqueue_op(op)
