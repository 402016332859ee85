"""The vector index: one small interface, two Qdrant backends.

* ``EdgeIndex`` (default): the Qdrant engine in-process (``qdrant-edge-py``), one shard under
  ``<data_dir>/qdrant/``. Filtered hybrid queries at 100k points take a few milliseconds.
* ``ClientIndex``: a Qdrant server through ``qdrant-client`` (``memory.qdrant_url``), or its
  ``:memory:`` local mode, which tests use to run the same suite against the client code path.

Both store one point per chunk with a dense vector (``dense``), a BM25 sparse vector (``bm25``, IDF
applied by Qdrant) and a payload (scope, path, chunk id, content hash, text, timestamps). Every read
of vectors or chunk text requires a non-empty list of scopes that becomes a payload filter; the
only caller is ``gateway.memory.recall``. ``manifest`` exposes ids and hashes, never text.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_NS = uuid.UUID("6f1f3c1e-8d0a-4c55-9a43-7c1f0f9f2b11")
PAYLOAD_INDEXES = {"scope": "keyword", "path": "keyword", "valid_until": "float"}
# What ranking needs of each candidate; the full payload (text ...) is fetched for the final k only,
# which halves the time of a query at 100k points (payload decoding dominated it).
CANDIDATE_FIELDS = ["ts", "session"]


class IndexBusyError(RuntimeError):
    """The embedded index is open in another process (a running gateway holds its write-ahead log)."""


class ScopeRequiredError(ValueError):
    """A read without a scope: there is no way to query across users."""


def point_id(scope: str, chunk_id: str) -> str:
    return str(uuid.uuid5(_NS, f"{scope}\x1f{chunk_id}"))


@dataclass(frozen=True, slots=True)
class SparseVec:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True, slots=True)
class IndexPoint:
    id: str
    dense: list[float]
    sparse: SparseVec
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


def require_scopes(scopes: Sequence[str]) -> list[str]:
    clean = [s for s in scopes if isinstance(s, str) and s]
    if not clean or len(clean) != len(scopes):
        raise ScopeRequiredError("every index read needs at least one non-empty scope")
    return clean


class VectorIndex(ABC):
    backend: str

    @abstractmethod
    def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    @abstractmethod
    def delete_ids(self, ids: Sequence[str]) -> None: ...

    @abstractmethod
    def delete_scope(self, scope: str) -> None:
        """Drop every point of one scope (a full rebuild starts with this)."""

    @abstractmethod
    def manifest(self, scope: str, path: str | None = None) -> dict[str, tuple[str, str]]:
        """``point id -> (path, content hash)`` of one scope (or one file of it): what incremental
        indexing compares against."""

    @abstractmethod
    def count(self, scope: str | None = None) -> int: ...

    @abstractmethod
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
        """Dense and sparse candidates inside ``scopes`` (of ``kinds``, if given), not expired at ``now``.

        Private to ``gateway.memory.recall``, which is the one place that reads vectors. Candidates
        carry only ``CANDIDATE_FIELDS`` of their payload."""

    @abstractmethod
    def _payloads(self, *, scopes: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Full payloads of ``ids``; points outside ``scopes`` are left out. Private to recall."""

    def flush(self) -> None:  # noqa: B027 - optional for backends that persist on their own
        pass

    def optimize(self) -> None:  # noqa: B027 - servers optimise in the background on their own
        """Build search structures (HNSW, payload indexes) for what was upserted so far."""

    @abstractmethod
    def close(self) -> None: ...


def open_index(
    *,
    path: str | None,
    url: str | None,
    dim: int,
    collection: str,
    api_key: str | None = None,
    search_threads: int = 1,
) -> VectorIndex:
    """``url`` (``http(s)://...`` or ``:memory:``) selects qdrant-client, otherwise the embedded shard."""
    if url:
        from gateway.memory.index_client import ClientIndex

        return ClientIndex(url=url, api_key=api_key, dim=dim, collection=collection)
    if not path:
        raise ValueError("the embedded index needs a directory")
    from gateway.memory.index_edge import EdgeIndex

    return EdgeIndex(path, dim=dim, search_threads=search_threads)
