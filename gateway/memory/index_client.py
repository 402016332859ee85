"""Qdrant server (or ``:memory:`` local mode) through ``qdrant-client``: the scale-out backend."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from gateway.memory.index import (
    CANDIDATE_FIELDS,
    Candidate,
    IndexPoint,
    SparseVec,
    VectorIndex,
    require_scopes,
)

_SCROLL_PAGE = 2048


def _scope_filter(
    scopes: Sequence[str], now: float | None = None, path: str | None = None, kinds: Sequence[str] = ()
) -> models.Filter:
    must: list[models.Condition] = [models.FieldCondition(key="scope", match=models.MatchAny(any=list(scopes)))]
    if now is not None:
        must.append(models.FieldCondition(key="valid_until", range=models.Range(gte=now)))
    if path is not None:
        must.append(models.FieldCondition(key="path", match=models.MatchValue(value=path)))
    if kinds:
        must.append(models.FieldCondition(key="kind", match=models.MatchAny(any=list(kinds))))
    return models.Filter(must=must)


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

    def delete_scope(self, scope: str) -> None:
        with self._guard():
            self._client.delete(self._name, models.FilterSelector(filter=_scope_filter(require_scopes([scope]))))

    def manifest(self, scope: str, path: str | None = None) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        offset = None
        flt = _scope_filter(require_scopes([scope]), path=path)
        while True:
            with self._guard():
                records, offset = self._client.scroll(
                    self._name, scroll_filter=flt, limit=_SCROLL_PAGE, offset=offset, with_payload=["path", "hash"]
                )
            for r in records:
                payload = r.payload or {}
                out[str(r.id)] = (payload.get("path", ""), payload.get("hash", ""))
            if offset is None:
                return out

    def count(self, scope: str | None = None) -> int:
        flt = _scope_filter(require_scopes([scope])) if scope is not None else None
        with self._guard():
            return int(self._client.count(self._name, count_filter=flt, exact=True).count)

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
        reqs = [models.QueryRequest(query=dense, using="dense", filter=flt, limit=limit, with_payload=CANDIDATE_FIELDS)]
        if sparse.indices:
            reqs.append(
                models.QueryRequest(
                    query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                    using="bm25",
                    filter=flt,
                    limit=limit,
                    with_payload=CANDIDATE_FIELDS,
                    params=models.SearchParams(idf=models.IdfCorpusParams(corpus=_scope_filter(scopes))),
                )
            )
        with self._guard():
            results = self._client.query_batch_points(self._name, reqs)
        conv = [[Candidate(str(p.id), float(p.score), dict(p.payload or {})) for p in r.points] for r in results]
        return conv[0], (conv[1] if len(conv) > 1 else [])

    def _payloads(self, *, scopes: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        allowed = set(require_scopes(scopes))
        if not ids:
            return {}
        with self._guard():
            records = self._client.retrieve(self._name, list(ids), with_payload=True)
        out = {str(r.id): dict(r.payload or {}) for r in records}
        return {k: v for k, v in out.items() if v.get("scope") in allowed}

    def close(self) -> None:
        self._client.close()
