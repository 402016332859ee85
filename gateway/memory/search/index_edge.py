"""Embedded Qdrant (``qdrant-edge-py``): the default index backend, one shard in a directory.

The shard writes through memory-mapped files, so a write on a full filesystem is a SIGBUS that kills
the process, not an exception. With a ``DiskFloor`` every write (and opening, which replays the
write-ahead log) first checks free space and raises ``LowDiskSpaceError`` instead of writing.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from gateway.memory.search.index import (
    CANDIDATE_FIELDS,
    AtLeast,
    Candidate,
    Condition,
    HasId,
    IndexBusyError,
    IndexPoint,
    Match,
    ScopeFilter,
    SparseVec,
    VectorIndex,
)
from gateway.util.diskspace import DiskFloor, open_cost

log = logging.getLogger(__name__)

_SCROLL_PAGE = 2048
# The embedded engine only optimises when asked: fresh points sit in a plain (brute-force) segment.
# Re-optimise after this many upserts so HNSW keeps covering most points as memory grows.
_OPTIMIZE_EVERY = 20_000


def _condition(c: Condition) -> Any:
    if isinstance(c, Match):
        return qe.FieldCondition(key=c.key, match=qe.MatchAny(any=list(c.values)))
    if isinstance(c, AtLeast):
        return qe.FieldCondition(key=c.key, range=qe.RangeFloat(gte=c.value))
    if isinstance(c, HasId):
        return qe.HasIdCondition(set(c.ids))
    raise TypeError(f"no translation for {c!r}")


def _filter(flt: ScopeFilter) -> qe.Filter:
    """A translation of ``flt`` (see ``gateway.memory.search.index.scope_filter``), condition by condition."""
    return qe.Filter(must=[_condition(c) for c in flt.must])


class EdgeIndex(VectorIndex):
    backend = "edge"

    def __init__(
        self, path: str | Path, *, dim: int, search_threads: int = 1, floor: DiskFloor | None = None
    ) -> None:
        path = Path(path)
        self._floor = floor
        # Loading replays the write-ahead log into the memory-mapped segments, and on tmpfs touching
        # a map at all allocates: both count against the floor.
        if floor is not None:
            floor.require("opening the memory index", extra=open_cost(path))
        config = qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            max_search_threads=search_threads,
        )
        self._path, self._config = path, config
        if path.exists() and any(path.iterdir()):
            try:
                self._shard = qe.EdgeShard.load(str(path), config)
            except Exception as exc:
                if "WouldBlock" in str(exc):  # the WAL is locked by the process that has it open
                    raise IndexBusyError(f"the memory index {path} is in use by another process") from exc
                raise
        else:
            self._shard = _create_shard(path, config)
        self._write = threading.Lock()
        self._readers = _Readers()
        self._closed = False
        self._since_optimize = 0

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        batch = [
            qe.Point(
                id=p.id,
                vector={"dense": p.dense, "bm25": qe.SparseVector(p.sparse.indices, p.sparse.values)},
                payload=p.payload,
            )
            for p in points
        ]
        self._room("indexing")
        with self._write:
            self._shard.update(qe.UpdateOperation.upsert_points(batch))
            self._since_optimize += len(batch)
            if self._since_optimize >= _OPTIMIZE_EVERY:
                self._since_optimize = 0
                self._shard.optimize()

    def delete_ids(self, ids: Sequence[str]) -> None:
        if ids:
            self._room("indexing")  # a delete is a write-ahead-log entry and flag pages too
            with self._write:
                self._shard.update(qe.UpdateOperation.delete_points(list(ids)))

    def _delete(self, flt: ScopeFilter) -> None:
        self._room("indexing")
        with self._write:
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(_filter(flt)))

    def _scroll(self, flt: ScopeFilter, fields: list[str] | bool) -> Iterator[tuple[str, dict[str, Any]]]:
        offset = None
        native = _filter(flt)
        while True:
            req = qe.ScrollRequest(offset=offset, limit=_SCROLL_PAGE, filter=native, with_payload=fields)
            with self._readers.read():
                records, offset = self._shard.scroll(req)
            for r in records:
                yield str(r.id), dict(r.payload or {})
            if offset is None:
                return

    def _count(self, flt: ScopeFilter | None) -> int:
        with self._readers.read():
            return int(self._shard.count(qe.CountRequest(filter=_filter(flt) if flt is not None else None)))

    def _query(
        self, flt: ScopeFilter, idf: ScopeFilter, dense: list[float], sparse: SparseVec, limit: int
    ) -> tuple[list[Candidate], list[Candidate]]:
        native = _filter(flt)
        reqs = [
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(dense, using="dense"),
                filter=native,
                with_payload=CANDIDATE_FIELDS,
            ),
        ]
        if sparse.indices:
            reqs.append(
                qe.QueryRequest(
                    limit=limit,
                    query=qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using="bm25"),
                    filter=native,
                    with_payload=CANDIDATE_FIELDS,
                    params=qe.SearchParams(idf=qe.IdfParams(corpus=_filter(idf))),
                )
            )
        with self._readers.read():
            results = self._shard.query_batch(qe.QueryBatchRequest(reqs))
        conv = [[Candidate(str(p.id), float(p.score), dict(p.payload or {})) for p in res] for res in results]
        return conv[0], (conv[1] if len(conv) > 1 else [])

    def flush(self) -> None:
        with self._write:
            self._shard.flush()

    def optimize(self) -> None:
        self._room("optimizing the memory index")  # writes whole new segments
        with self._write:
            self._since_optimize = 0
            self._shard.optimize()

    def compact(self) -> None:
        """Copy the live points into a new shard and replace the old one with it. Deleting a point
        only flags it: its payload (the chunk's text) stays in the segment files and the write-ahead
        log until then. Searches go on during the copy; the swap waits for those running and holds new
        ones back until the new shard is open (a forget compacts while the person goes on talking)."""
        self._room("compacting the memory index")
        with self._write:
            fresh = self._path.with_name(self._path.name + ".compact")
            old = self._path.with_name(self._path.name + ".old")
            for leftover in (fresh, old):
                if leftover.exists():
                    shutil.rmtree(leftover)
            shard = _create_shard(fresh, self._config)
            try:
                offset = None
                while True:
                    req = qe.ScrollRequest(offset=offset, limit=_SCROLL_PAGE, with_payload=True, with_vector=True)
                    records, offset = self._shard.scroll(req)
                    if records:
                        shard.update(qe.UpdateOperation.upsert_points(
                            [qe.Point(id=r.id, vector=r.vector, payload=r.payload) for r in records]))  # fmt: skip
                    if offset is None:
                        break
                shard.flush()
            finally:
                shard.close()
            with self._readers.swap():
                self._shard.close()
                self._path.rename(old)
                fresh.rename(self._path)
                self._shard = qe.EdgeShard.load(str(self._path), self._config)
            shutil.rmtree(old)
            self._since_optimize = 0

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with self._write:
                try:
                    self._shard.flush()
                except Exception as exc:
                    # A flush writes with write(2) (ENOSPC is an error, not a signal); what it could
                    # not write is still in the write-ahead log, replayed on the next open.
                    log.warning("memory index: flush on close failed (%s); the write-ahead log keeps it", exc)
                self._shard.close()

    def _room(self, what: str) -> None:
        if self._floor is not None:
            self._floor.require(what)


class _Readers:
    """Reads share the shard; a swap (``compact``) waits until none runs and holds new ones back."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._reading = 0
        self._swapping = False

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._swapping)
            self._reading += 1
        try:
            yield
        finally:
            with self._cond:
                self._reading -= 1
                if not self._reading:
                    self._cond.notify_all()

    @contextmanager
    def swap(self) -> Iterator[None]:
        with self._cond:
            self._swapping = True
            self._cond.wait_for(lambda: not self._reading)
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()


def _create_shard(path: Path, config: Any) -> Any:
    path.mkdir(parents=True, exist_ok=True)
    shard = qe.EdgeShard.create(str(path), config)
    # is_tenant: Qdrant lays points out by scope, so a one-user query touches one user's data.
    shard.update(qe.UpdateOperation.create_field_index("scope", qe.KeywordIndexParams(is_tenant=True)))
    shard.update(qe.UpdateOperation.create_field_index("path", qe.PayloadSchemaType.Keyword))
    shard.update(qe.UpdateOperation.create_field_index("valid_until", qe.PayloadSchemaType.Float))
    return shard
