"""MemoryService: the memory wing as the gateway holds it, three parts started and closed in order.

- ``stores`` (``gateway.memory.files.stores.Stores``): the guarded store of every scope, built in
  one place; each write is reported to its subscribers;
- ``indexing`` (``queue.IndexQueue``): the index queue those writes go to, with the disk floor it
  pauses at (``pause.IndexPause``);
- ``loader`` (``loading.IndexLoader``): the embedder and the index, loaded now or in the background.

What is left here is recall itself: ``recall`` (the query, on threads of its own so it never stalls
the loop that serves other conversations), its counters and the state /healthz reports.

Scopes name roots (see ``gateway.memory.files.scopes``): ``user:<id>``,
``channel:<channel>-<conversation>``, ``persona:<name>``. Which stages use the index is the
gateway's to say (``live_indexing``, ``every_turn``): the wing names no plugin.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from gateway.cluster.node import embedded_index_dir
from gateway.config import Config
from gateway.memory.files.stores import Stores
from gateway.memory.search.index import Narrow, VectorIndex
from gateway.memory.search.keyword import KeywordSearch
from gateway.memory.search.loading import IndexLoader
from gateway.memory.search.pause import IndexPause
from gateway.memory.search.queue import IndexQueue
from gateway.memory.search.recall import Hit, RecallSettings, recall
from gateway.util.diskspace import MB, DiskFloor

log = logging.getLogger(__name__)

__all__ = ["MemoryService", "recall_threads"]


def recall_threads(embedded: bool, cpus: int | None = None) -> int:
    """Threads that run recall queries. An embedded index's query is CPU work (the query's embedding
    and the search): it gets the cores but one, which the event loop keeps. Two on two cores took
    turns from the loop: with 50 clients one thread served 1.09-1.15x the turns/s, each query in
    0.6-0.74x the wall time. A Qdrant server's query mostly waits on the network: two at least."""
    if cpus is None:  # the cores this process may run on (a container's share), not the host's
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
    return max(1, cpus - 1) if embedded else max(2, cpus - 1)


def recall_settings(config: Config) -> RecallSettings:
    mem = config.memory
    return RecallSettings(
        dense_weight=mem.dense_weight,
        sparse_weight=mem.sparse_weight,
        half_life_days=mem.recency_half_life_days,
        recency_weight=mem.recency_weight,
        candidates=mem.recall_candidates,
        neighbor_weight=mem.neighbor_weight,
        neighbor_window_s=mem.neighbor_window_s,
        speaker_weight=mem.speaker_weight,
        date_weight=mem.date_weight,
        diversity=mem.session_diversity,
    )


class MemoryService:
    def __init__(
        self, config: Config, *, index: VectorIndex | None = None, detach_if_busy: bool = False,
        live_indexing: bool = True, every_turn: bool = True,
    ) -> None:
        """``live_indexing``: writes are indexed as they happen (off when no stage keeps the index).
        ``every_turn``: a stage uses the index on every turn; without one a background start loads
        it on first use only. ``detach_if_busy``: see ``loading.IndexLoader``."""
        self.config = config
        self.every_turn = every_turn
        self.settings = recall_settings(config)
        mem = config.memory
        self.stores = Stores(Path(config.data_dir), max_file_bytes=mem.max_file_bytes, max_dir_files=mem.max_dir_files)
        index_root = embedded_index_dir(config)  # <data_dir>/qdrant; per node in a cluster
        # The floor guards the embedded index (a Qdrant server minds its own disk); it is watched
        # either way, so /healthz tells about a data directory running out of space.
        embedded = mem.qdrant_url is None and index is None
        floor = DiskFloor(index_root if embedded else Path(config.data_dir), mem.min_free_mb * MB)
        self.loader = IndexLoader(
            mem, index_root=index_root, pause=IndexPause(floor, check_s=mem.disk_check_s), index=index,
            detach_if_busy=detach_if_busy, on_loaded=self._loaded,
        )
        self.indexing = IndexQueue(self.loader, self.stores, live=live_indexing)
        self.stores.subscribe(self.indexing.on_write)
        self.keyword = KeywordSearch(self.stores)
        self.recalls = 0
        self._query_pool: ThreadPoolExecutor | None = None

    # -------------------------------------------------------------------------------- lifecycle

    async def start(self, *, background: bool = False) -> None:
        """Load the embedder and open the index. ``background=True`` (the daemon) returns at once and
        loads on its own task: the gateway answers while it loads, turns meanwhile go without recall
        (``ready`` is False; the recall stage notes it in the turn's context record) and index work
        waits for it (docs/memory.md, "Start-up")."""
        self.indexing.open()
        self._query_pool = ThreadPoolExecutor(recall_threads(self.loader.embedded), thread_name_prefix="kith-recall")
        await self.loader.start(background=background, every_turn=self.every_turn)

    def _loaded(self) -> None:
        self.indexing.run()

    async def close(self) -> None:
        self.indexing.index_sink = None
        await self.loader.stop()
        await self.indexing.stop()
        index = self.loader.index_or_none
        if index is not None:
            await self.indexing.on_index_thread(index.close)
        self.indexing.close_pool()
        if self._query_pool is not None:
            self._query_pool.shutdown(wait=False)
        self._query_pool = None

    @property
    def ready(self) -> bool:
        """The embedder is loaded and the index open (or known to be unavailable): recall can run."""
        return self.loader.ready

    @property
    def detached(self) -> bool:
        """This process runs without the index (another one holds it); index work goes to the bus."""
        return self.loader.detached

    @property
    def keyword_only(self) -> bool:
        """Recall runs on keywords alone: loading failed, or the index stays closed on a full disk."""
        loader = self.loader
        return not loader.index_open and not loader.detached and (
            bool(loader.load_error) or self.indexing.paused)

    @property
    def load_error(self) -> str:
        return self.loader.load_error

    def health_problems(self) -> list[str]:
        """Why memory is not at full service, for /healthz (empty when it is)."""
        pause = self.indexing.pause
        if self.loader.load_error:
            return [f"memory did not load (recall is keyword only): {self.loader.load_error}"]
        if pause.paused:
            opened = "" if self.loader.index_open else " (the index is not open: recall is keyword only)"
            why = pause.low_space.describe() if pause.low_space else "disk space is back, the index does not open yet"
            return [f"memory indexing paused{opened}: {why}; {self.indexing.kept} index operations kept"]
        if pause.low_space is not None:
            return [f"low disk space: {pause.low_space.describe()}"]
        return []

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
        narrow: Narrow | None = None,
    ) -> list[Hit]:
        """Top ``k`` memories for ``query`` inside ``scope`` (a scope or a list of scopes); ``tz`` is
        the person's time zone, on whose calendar "yesterday" or "last summer" in the query is read;
        ``narrow`` keeps only chunks of a topic, naming an entity, or dated since a time."""
        scopes = [scope] if isinstance(scope, str) else list(scope)
        for s in scopes:
            self.stores.root_for(s)
        loader = self.loader
        if loader.deferred:
            await loader.wait_ready()  # loaded on first use: this caller waits for it
        if self.keyword_only:
            # The embedder or the index did not load (or a full disk keeps the index closed): the
            # files are still there, so recall ranks them by keywords alone (seed 004).
            self.recalls += 1
            stamp = now.timestamp() if isinstance(now, datetime) else now
            return await asyncio.get_running_loop().run_in_executor(self._query_pool, functools.partial(
                self.keyword.search, scopes=scopes, query=query, k=k, now=stamp, kinds=kinds, narrow=narrow))
        if not loader.ready:
            return []  # still loading in the background: answer without recall
        index, embedder, indexer = loader.require_index(), loader.require_embedder(), loader.require_indexer()
        self.recalls += 1
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
            narrow=narrow,
        ))

    def stats(self) -> dict[str, Any]:
        index = self.loader.index_or_none
        return {
            "backend": index.backend if index else None,
            "embedding_model": self.config.memory.embedding_model,
            "points": index.count() if index else 0,
            "queued": self.indexing.queued,
            "paused": self.indexing.paused,
            "kept": self.indexing.kept,
            "recalls": self.recalls,
            **self.indexing.counters,
        }

    async def report(self) -> dict[str, Any]:
        """``stats()`` plus files, bytes and index points per root (``kith memory stats``)."""
        scopes: dict[str, Any] = {}
        for scope in self.stores.known_scopes():
            files = await asyncio.to_thread(self.stores.store_for(scope).files)
            scopes[scope] = {
                "files": len(files),
                "bytes": sum(f.size for f in files),
                "points": await asyncio.to_thread(self.scope_count, scope),
            }
        return {**self.stats(), "scopes": scopes}

    def scope_count(self, scope: str) -> int:
        if not self.loader.index_open and self.indexing.paused:
            return 0
        return self.loader.require_index().count(scope)
