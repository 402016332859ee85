"""Qdrant server (or ``:memory:`` local mode) through ``qdrant-client``: the scale-out backend."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from gateway.memory.search.index import (
    CANDIDATE_FIELDS,
    AtLeast,
    Candidate,
    Condition,
    HasId,
    IndexPoint,
    Match,
    ScopeFilter,
    SparseVec,
    VectorIndex,
)

_SCROLL_PAGE = 2048


def _condition(c: Condition) -> models.Condition:
    if isinstance(c, Match):
        return models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.values)))
    if isinstance(c, AtLeast):
        return models.FieldCondition(key=c.key, range=models.Range(gte=c.value))
    if isinstance(c, HasId):
        return models.HasIdCondition(has_id=list(c.ids))
    raise TypeError(f"no translation for {c!r}")


def _filter(flt: ScopeFilter) -> models.Filter:
    """A translation of ``flt`` (see ``gateway.memory.search.index.scope_filter``), condition by condition."""
    return models.Filter(must=[_condition(c) for c in flt.must])


class ClientIndex(VectorIndex):
    backend = "qdrant-client"

    def __init__(self, *, url: str, dim: int, collection: str, api_key: str | None = None) -> None:
        # The local mode is plain Python over numpy arrays, not safe against a scroll running while
        # another thread upserts; a server client is, and keeps its concurrency.
        self._lock: threading.Lock | None = None
        if url == ":memory:":
            self._client = QdrantClient(location=":memory:")
            self._lock = threading.Lock()
        else:
            self._client = QdrantClient(url=url, api_key=api_key)
        self._name = collection
        if not self._client.collection_exists(collection):
            self._client.create_collection(
                collection,
                vectors_config={"dense": models.VectorParams(size=dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
            if self._lock is None:  # the local mode ignores payload indexes (and warns about them)
                self._create_payload_indexes(collection)

    def _create_payload_indexes(self, collection: str) -> None:
        self._client.create_payload_index(
            collection,
            "scope",
            models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
        )
        self._client.create_payload_index(collection, "path", models.PayloadSchemaType.KEYWORD)
        self._client.create_payload_index(collection, "valid_until", models.PayloadSchemaType.FLOAT)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        if self._lock is None:
            yield
            return
        with self._lock:
            yield

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        with self._guard():
            self._upsert(points)

    def _upsert(self, points: Sequence[IndexPoint]) -> None:
        self._client.upsert(
            self._name,
            [
                models.PointStruct(
                    id=p.id,
                    vector={
                        "dense": p.dense,
                        "bm25": models.SparseVector(indices=p.sparse.indices, values=p.sparse.values),
                    },
                    payload=p.payload,
                )
                for p in points
            ],
        )

    def delete_ids(self, ids: Sequence[str]) -> None:
        if ids:
            with self._guard():
                self._client.delete(self._name, models.PointIdsList(points=list(ids)))

    def _delete(self, flt: ScopeFilter) -> None:
        with self._guard():
            self._client.delete(self._name, models.FilterSelector(filter=_filter(flt)))

    def _scroll(self, flt: ScopeFilter, fields: list[str] | bool) -> Iterator[tuple[str, dict[str, Any]]]:
        offset = None
        native = _filter(flt)
        while True:
            with self._guard():
                records, offset = self._client.scroll(
                    self._name, scroll_filter=native, limit=_SCROLL_PAGE, offset=offset, with_payload=fields
                )
            for r in records:
                yield str(r.id), dict(r.payload or {})
            if offset is None:
                return

    def _count(self, flt: ScopeFilter | None) -> int:
        with self._guard():
            return int(self._client.count(self._name, count_filter=_filter(flt) if flt else None, exact=True).count)

    def _query(
        self, flt: ScopeFilter, idf: ScopeFilter, dense: list[float], sparse: SparseVec, limit: int
    ) -> tuple[list[Candidate], list[Candidate]]:
        native = _filter(flt)
        reqs = [
            models.QueryRequest(query=dense, using="dense", filter=native, limit=limit, with_payload=CANDIDATE_FIELDS)
        ]
        if sparse.indices:
            reqs.append(
                models.QueryRequest(
                    query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                    using="bm25",
                    filter=native,
                    limit=limit,
                    with_payload=CANDIDATE_FIELDS,
                    params=models.SearchParams(idf=models.IdfCorpusParams(corpus=_filter(idf))),
                )
            )
        with self._guard():
            results = self._client.query_batch_points(self._name, reqs)
        conv = [[Candidate(str(p.id), float(p.score), dict(p.payload or {})) for p in r.points] for r in results]
        return conv[0], (conv[1] if len(conv) > 1 else [])

    def close(self) -> None:
        self._client.close()
