"""Recall's load: the embedder and the vector index, opened now or in the background, and ready.

The daemon answers before the embedder (~65 MB) and the index have loaded: ``start(background=True)``
leaves the load to the gateway (``begin_loading``, once it serves) or, when no stage uses the index on
every turn, to its first use (``wait_ready``). Until ``ready`` turns go without recall; a load that
fails is tried again with a backoff and named in ``load_error`` (docs/memory.md, "Start-up").

``detach_if_busy``: when another process holds the embedded index (``kith worker`` next to the daemon)
the loader runs without one (``detached``): writes are still reported to the index sink (the job bus)
and anything that needs the index raises ``IndexBusyError``. With no room on the disk to open the
index, the pause (``pause.IndexPause``) is set and the index queue opens it once space returns.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.memory.search.index import IndexBusyError, VectorIndex, open_index
from gateway.memory.search.indexer import Indexer
from gateway.memory.search.pause import IndexPause
from gateway.memory.search.sparse import SparseEncoder
from gateway.memory.settings import MemoryConfig
from gateway.util.diskspace import DiskFloor, LowDiskSpaceError

if TYPE_CHECKING:  # numpy and onnxruntime: imported by the load (_open), off the start-up path
    from gateway.memory.search.embed import Embedder

log = logging.getLogger(__name__)

LOAD_RETRY_S = (1.0, 2.0, 5.0, 15.0, 60.0)  # waits between attempts when background loading failed


class IndexLoader:
    def __init__(
        self, mem: MemoryConfig, *, index_root: Path, pause: IndexPause, index: VectorIndex | None = None,
        detach_if_busy: bool = False, on_loaded: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_loaded`` runs on the loop once the index is open and this process holds it."""
        self.mem = mem
        self.index_root = index_root  # <data_dir>/qdrant; per node in a cluster
        self.pause = pause
        self.embedded = mem.qdrant_url is None and index is None  # a Qdrant server minds its own disk
        self.detach_if_busy = detach_if_busy
        self.detached = False
        self.on_loaded = on_loaded
        self._index = index
        self._embedder: Embedder | None = None
        self._indexer: Indexer | None = None
        self._ready = asyncio.Event()  # set once start-up loading has ended, whatever its outcome
        self._loader: asyncio.Task[None] | None = None
        self.load_error = ""  # why background loading failed ("" = it did not)
        self._deferred = False  # start() left loading to the first use (no stage needs it every turn)
        self._load_pending = False  # start() left loading to the gateway, once it serves (begin_loading)

    @property
    def floor(self) -> DiskFloor:
        return self.pause.floor

    async def start(self, *, background: bool, every_turn: bool) -> None:
        """Load now, or (``background``) leave it to ``begin_loading`` or, when no stage uses the index
        on ``every_turn``, to the first use."""
        if background and not every_turn:
            # No stage recalls or indexes per turn (the "core" gateway, memory stages denied): the
            # embedder and the index are loaded by the first thing that needs them, if any.
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

    @property
    def deferred(self) -> bool:
        """Loading waits for a first use (a recall waits for it; nothing else starts it)."""
        return self._deferred

    @property
    def index_open(self) -> bool:
        return self._index is not None

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
        if attached:
            self.on_loaded()

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
                self._index = await asyncio.to_thread(self.open_index, self._embedder)
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
                # that is a SIGBUS at every start. Start without the index; the queue opens it later.
                self.pause.pause(exc.space)
                log.warning("memory: the index is not opened (%s); turns are answered without recall"
                            " until space returns", exc.space.describe())
        if self._index is not None:
            self.attach(self._index)
        return True

    def attach(self, index: VectorIndex) -> None:
        """Use ``index`` (opened by the load, or by the queue once disk space returned)."""
        assert self._embedder is not None
        self._index = index
        self._indexer = Indexer(index, self._embedder, SparseEncoder(avg_len=self.mem.bm25_avg_len))

    def open_index(self, embedder: Embedder) -> VectorIndex:
        """Open the vector index for ``embedder`` (blocking)."""
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

    async def stop(self) -> None:
        """Let go of whoever waits, and end the load: a load under way is waited for (it runs in
        worker threads that cannot be interrupted, and the index it opens must be closed after); a
        load that failed and waits to try again is stopped instead."""
        self.abandon_load()
        if self._loader is not None:
            if self.load_error:
                self._loader.cancel()
            await asyncio.gather(self._loader, return_exceptions=True)
            self._loader = None

    @property
    def loading(self) -> bool:
        """A load was begun (it may have ended since)."""
        return self._loader is not None

    # --------------------------------------------------------------------------- the handles

    def require_indexer(self) -> Indexer:
        if self.detached:
            raise IndexBusyError("this process runs without the memory index (the gateway holds it)")
        if self._indexer is None:
            if self.pause.paused:
                raise self.pause.error("opening the memory index")
            raise RuntimeError("MemoryService.start() has not been awaited")
        return self._indexer

    def require_index(self) -> VectorIndex:
        self.require_indexer()
        assert self._index is not None
        return self._index

    def require_embedder(self) -> Embedder:
        self.require_indexer()
        assert self._embedder is not None
        return self._embedder

    @property
    def embedder_loaded(self) -> Embedder | None:
        """The embedder once loaded (the index may still be closed), else None."""
        return self._embedder

    @property
    def index_or_none(self) -> VectorIndex | None:
        return self._index

    @property
    def index(self) -> VectorIndex:
        """The vector index (benchmarks fill it directly; everything else goes through recall)."""
        return self.require_index()

    @property
    def embedder(self) -> Embedder:
        return self.require_embedder()

    @property
    def sparse(self) -> SparseEncoder:
        return self.require_indexer().sparse
