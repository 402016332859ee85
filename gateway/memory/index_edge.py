"""Embedded Qdrant (``qdrant-edge-py``): the default index backend, one shard in a directory."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from gateway.memory.index import (
    CANDIDATE_FIELDS,
    Candidate,
    IndexBusyError,
    IndexPoint,
    SparseVec,
    VectorIndex,
    require_scopes,
)

_SCROLL_PAGE = 2048
# The embedded engine only optimises when asked: fresh points sit in a plain (brute-force) segment.
# Re-optimise after this many upserts so HNSW keeps covering most points as memory grows.
_OPTIMIZE_EVERY = 20_000


def _scope_filter(
    scopes: Sequence[str], now: float | None = None, path: str | None = None, kinds: Sequence[str] = ()
) -> qe.Filter:
    must: list[Any] = [qe.FieldCondition(key="scope", match=qe.MatchAny(any=list(scopes)))]
    if now is not None:
        must.append(qe.FieldCondition(key="valid_until", range=qe.RangeFloat(gte=now)))
    if path is not None:
        must.append(qe.FieldCondition(key="path", match=qe.MatchValue(value=path)))
    if kinds:
        must.append(qe.FieldCondition(key="kind", match=qe.MatchAny(any=list(kinds))))
    return qe.Filter(must=must)


class EdgeIndex(VectorIndex):
    backend = "edge"

    def __init__(self, path: str | Path, *, dim: int, search_threads: int = 1) -> None:
        path = Path(path)
        config = qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            max_search_threads=search_threads,
        )
        if path.exists() and any(path.iterdir()):
            try:
                self._shard = qe.EdgeShard.load(str(path), config)
            except Exception as exc:
                if "WouldBlock" in str(exc):  # the WAL is locked by the process that has it open
                    raise IndexBusyError(f"the memory index {path} is in use by another process") from exc
                raise
        else:
            path.mkdir(parents=True, exist_ok=True)
            self._shard = qe.EdgeShard.create(str(path), config)
            # is_tenant: Qdrant lays points out by scope, so a one-user query touches one user's data.
            self._shard.update(qe.UpdateOperation.create_field_index("scope", qe.KeywordIndexParams(is_tenant=True)))
            self._shard.update(qe.UpdateOperation.create_field_index("path", qe.PayloadSchemaType.Keyword))
            self._shard.update(qe.UpdateOperation.create_field_index("valid_until", qe.PayloadSchemaType.Float))
        self._write = threading.Lock()
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
        with self._write:
            self._shard.update(qe.UpdateOperation.upsert_points(batch))
            self._since_optimize += len(batch)
            if self._since_optimize >= _OPTIMIZE_EVERY:
                self._since_optimize = 0
                self._shard.optimize()

    def delete_ids(self, ids: Sequence[str]) -> None:
        if ids:
            with self._write:
                self._shard.update(qe.UpdateOperation.delete_points(list(ids)))

    def delete_scope(self, scope: str) -> None:
        with self._write:
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(_scope_filter(require_scopes([scope]))))

    def manifest(self, scope: str, path: str | None = None) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        offset = None
        flt = _scope_filter(require_scopes([scope]), path=path)
        while True:
            req = qe.ScrollRequest(offset=offset, limit=_SCROLL_PAGE, filter=flt, with_payload=["path", "hash"])
            records, offset = self._shard.scroll(req)
            for r in records:
                payload = r.payload or {}
                out[str(r.id)] = (payload.get("path", ""), payload.get("hash", ""))
            if offset is None:
                return out

    def count(self, scope: str | None = None) -> int:
        flt = _scope_filter(require_scopes([scope])) if scope is not None else None
        return int(self._shard.count(qe.CountRequest(filter=flt)))

    def _search(
        self,
        *,
        scopes: Sequence[str],
        dense: list[float],
        sparse: SparseVec,
        limit: int,
        now: float,
        kinds: Sequence[str] = (),
    ) -> tuple[list[Candidate], list[Candidate]]:
        flt = _scope_filter(require_scopes(scopes), now, kinds=kinds)
        # IDF over the caller's own scopes: one user's vocabulary never shapes another's ranking.
        idf = qe.SearchParams(idf=qe.IdfParams(corpus=_scope_filter(scopes)))
        reqs = [
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(dense, using="dense"),
                filter=flt,
                with_payload=CANDIDATE_FIELDS,
            ),
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using="bm25"),
                filter=flt,
                with_payload=CANDIDATE_FIELDS,
                params=idf,
            ),
        ]
        if not sparse.indices:
            reqs = reqs[:1]
        results = self._shard.query_batch(qe.QueryBatchRequest(reqs))
        conv = [[Candidate(str(p.id), float(p.score), dict(p.payload or {})) for p in res] for res in results]
        return conv[0], (conv[1] if len(conv) > 1 else [])

    def _payloads(self, *, scopes: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        allowed = set(require_scopes(scopes))
        records = self._shard.retrieve(list(ids), with_payload=True, with_vector=False) if ids else []
        out = {str(r.id): dict(r.payload or {}) for r in records}
        return {k: v for k, v in out.items() if v.get("scope") in allowed}

    def flush(self) -> None:
        with self._write:
            self._shard.flush()

    def optimize(self) -> None:
        with self._write:
            self._since_optimize = 0
            self._shard.optimize()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with self._write:
                self._shard.flush()
                self._shard.close()
