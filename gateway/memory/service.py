"""MemoryService: what the gateway holds. Stores per root, live indexing, scoped recall.

Scopes name roots (see ``scopes``): ``user:<id>``, ``channel:<channel>-<conversation>``,
``persona:<name>``.
Every guarded write reports its file through the store's ``on_write``; a worker task drains those
into ``index_path`` off the event loop. Embedding and Qdrant calls always run in worker threads,
so a recall never stalls the loop that serves other conversations.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.config import Config
from gateway.memory.chunk import Chunk, turn_chunk
from gateway.memory.embed import Embedder, load_embedder
from gateway.memory.index import IndexBusyError, VectorIndex, open_index
from gateway.memory.indexer import Indexer, IndexReport
from gateway.memory.recall import Hit, RecallSettings, recall
from gateway.memory.scopes import ScopeError, channel_scope, known_scopes, root_for, user_scope
from gateway.memory.sparse import SparseEncoder
from gateway.memory.store import MemoryStore
from gateway.memory.transcript import TurnRecord

log = logging.getLogger(__name__)

__all__ = ["MemoryService", "ScopeError", "channel_scope", "user_scope"]

_LAST_TURNS = 4096  # sessions whose previous turn is remembered for dense context

IndexSink = Callable[[str, str], None]


class MemoryService:
    def __init__(self, config: Config, *, index: VectorIndex | None = None, detach_if_busy: bool = False) -> None:
        """``detach_if_busy``: when another process holds the embedded index (``kith worker`` next to
        the daemon), run without one: writes still go through the guarded store and are reported to
        the index sink (the job bus), recall raises ``IndexBusyError``."""
        self.config = config
        self.detach_if_busy = detach_if_busy
        self.detached = False
        self.index_sink: IndexSink | None = None
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
        )
        self._index = index
        self._embedder: Embedder | None = None
        self._indexer: Indexer | None = None
        self._stores: dict[str, MemoryStore] = {}
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None
        self._last_turn: dict[tuple[str, str], TurnRecord] = {}  # (scope, session) -> previous turn
        self.counters = {"recalls": 0, "indexed_files": 0, "embedded_chunks": 0, "index_errors": 0}
        # Own thread pools: indexing is CPU-heavy and long (a big file under load takes seconds), so
        # it runs one at a time on its own thread and can never starve recall, or any other
        # ``to_thread`` call on the turn path, of the default pool's few threads.
        self._index_pool: ThreadPoolExecutor | None = None
        self._query_pool: ThreadPoolExecutor | None = None

    # -------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._index_pool = ThreadPoolExecutor(1, thread_name_prefix="kith-index")
        self._query_pool = ThreadPoolExecutor(2, thread_name_prefix="kith-recall")
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
                return
        self._indexer = Indexer(self._index, self._embedder, SparseEncoder(avg_len=self.mem.bm25_avg_len))
        self._worker = asyncio.create_task(self._drain(), name="memory:indexer")

    def _open_index(self, embedder: Embedder) -> VectorIndex:
        key = self.mem.qdrant_api_key.get_secret_value() if self.mem.qdrant_api_key else None
        if self.mem.qdrant_url is None:
            # Two processes creating a new embedded index at once (two ``kith worker`` started
            # together) would race half-way through its files: opening is serialised, so the second
            # finds it created and locked by the first (IndexBusyError) instead.
            lock_dir = self.data_dir / "qdrant"
            lock_dir.mkdir(parents=True, exist_ok=True)
            with open(lock_dir / ".open.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                return self._open_index_unlocked(embedder, key)
        return self._open_index_unlocked(embedder, key)

    def _open_index_unlocked(self, embedder: Embedder, key: str | None) -> VectorIndex:
        return open_index(
            path=str(self.data_dir / "qdrant" / f"edge-{embedder.name}"),
            url=self.mem.qdrant_url,
            api_key=key,
            dim=embedder.dim,
            collection=f"kith_memory_{embedder.name}".replace("-", "_"),
            search_threads=self.mem.search_threads,
        )

    async def close(self) -> None:
        self.index_sink = None
        if self._worker is not None:
            await self.drain()
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        self._loop = None  # writes after close are still guarded, just no longer indexed live
        if self._index is not None:
            await self._indexing(self._index.close)
        for pool in (self._index_pool, self._query_pool):
            if pool is not None:
                pool.shutdown(wait=False)
        self._index_pool = self._query_pool = None

    async def _indexing(self, fn: Callable[..., Any], *args: Any) -> Any:
        # No pool = not started (or closed): the default pool does it.
        return await asyncio.get_running_loop().run_in_executor(self._index_pool, functools.partial(fn, *args))

    async def index_file(self, scope: str, rel: str) -> IndexReport:
        """Re-index one file of one scope on the indexing thread (what ``memory.index`` jobs call)."""
        report: IndexReport = await self._indexing(self.index_path, scope, rel)
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
        if self.index_sink is not None:
            self.index_sink(scope, rel)
            return
        self.enqueue_local(scope, rel)

    def enqueue_local(self, scope: str, rel: str) -> None:
        """Re-index on this process's own indexer task (no bus, or the bus refused the job)."""
        if self._loop is None or self._loop.is_closed() or self.detached:
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._queue.put_nowait((scope, rel))
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (scope, rel))

    async def _drain(self) -> None:
        while True:
            scope, rel = await self._queue.get()
            try:
                await self.index_file(scope, rel)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.counters["index_errors"] += 1
                log.exception("memory: re-indexing %s %s failed", scope, rel)
            finally:
                self._queue.task_done()

    def index_path(self, scope: str, rel: str) -> IndexReport:
        """Re-index one file of one scope (blocking). The seam a job-bus handler can call."""
        report = self._require_indexer().index_path(scope, self.store_for(scope), rel)
        self._count(report)
        return report

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
        report = await self._indexing(self._require_indexer().index_chunks, scope, chunks)
        self._count(report)
        return report

    async def sync(self, scope: str) -> IndexReport:
        """Incremental pass over a root (startup catch-up after edits made while stopped)."""
        await asyncio.to_thread(self.store_for(scope).remove_stale_temp_files)
        report = await self._indexing(self._require_indexer().sync, scope, self.store_for(scope))
        self._count(report)
        return report

    async def reindex(self, user_id: str | None = None) -> dict[str, IndexReport]:
        """Rebuild from the files: one user's scope, or every root under the data directory."""
        scopes = [user_scope(user_id)] if user_id else self.known_scopes()
        out = {}
        for scope in scopes:
            out[scope] = await self._indexing(self._require_indexer().rebuild, scope, self.store_for(scope))
            self._count(out[scope])
        await self._indexing(self._require_index().optimize)
        return out

    async def rebuild(self, scope: str) -> IndexReport:
        """Drop and rebuild one scope's index from its files (after a merge moved them in)."""
        report = await self._indexing(self._require_indexer().rebuild, scope, self.store_for(scope))
        self._count(report)
        return report

    async def purge(self, scope: str) -> None:
        """Forget everything indexed for a scope (a merged-away user); its files are already gone."""
        self.root_for(scope)
        await self._indexing(self._require_index().delete_scope, scope)
        self._stores.pop(scope, None)

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
    ) -> list[Hit]:
        """Top ``k`` memories for ``query`` inside ``scope`` (a scope or a list of scopes)."""
        scopes = [scope] if isinstance(scope, str) else list(scope)
        for s in scopes:
            self.root_for(s)
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
        ))

    def stats(self) -> dict[str, Any]:
        index = self._index
        return {
            "backend": index.backend if index else None,
            "embedding_model": self.mem.embedding_model,
            "points": index.count() if index else 0,
            "queued": self._queue.qsize(),
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
        return self._require_index().count(scope)

    # -------------------------------------------------------------------------------- internals

    def _count(self, report: IndexReport) -> None:
        self.counters["indexed_files"] += report.files
        self.counters["embedded_chunks"] += report.embedded

    def _require_indexer(self) -> Indexer:
        if self.detached:
            raise IndexBusyError("this process runs without the memory index (the gateway holds it)")
        if self._indexer is None:
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
