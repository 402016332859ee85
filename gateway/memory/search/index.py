"""The vector index: one small interface, two Qdrant backends.

* ``EdgeIndex`` (default): the Qdrant engine in-process (``qdrant-edge-py``), one shard under
  ``<data_dir>/qdrant/``. Filtered hybrid queries at 100k points take a few milliseconds.
* ``ClientIndex``: a Qdrant server through ``qdrant-client`` (``memory.qdrant_url``), or its
  ``:memory:`` local mode, which tests use to run the same suite against the client code path.

Both store one point per chunk with a dense vector (``dense``), a BM25 sparse vector (``bm25``, IDF
applied by Qdrant) and a payload (scope, path, chunk id, content hash, text, timestamps). Every read
is bounded by ``scope_filter``, the one function that turns a non-empty list of scopes into the
payload filter; the backends only translate its conditions. Vectors and chunk text are read by
``gateway.memory.search.recall`` alone; ``manifest`` exposes ids and hashes, never text.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.util.diskspace import DiskFloor

_NS = uuid.UUID("6f1f3c1e-8d0a-4c55-9a43-7c1f0f9f2b11")
PAYLOAD_INDEXES = {"scope": "keyword", "path": "keyword", "valid_until": "float"}
# What ranking needs of each candidate; the full payload (text ...) is fetched for the final k only,
# which halves the time of a query at 100k points (payload decoding dominated it).
CANDIDATE_FIELDS = ["ts", "session", "speaker"]


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


@dataclass(frozen=True, slots=True)
class Match:
    """``payload[key]`` is one of ``values``."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AtLeast:
    """``payload[key] >= value``."""

    key: str
    value: float


@dataclass(frozen=True, slots=True)
class HasId:
    ids: tuple[str, ...]


Condition = Match | AtLeast | HasId


@dataclass(frozen=True, slots=True)
class Narrow:
    """What a search may be narrowed to besides its scopes (seed 004): a chunk's dominant topic, an
    entity it names (payload fields the indexer sets from a chunk's ``Topics:`` / ``Entities:``
    lines and ``topics/<slug>.md``), and a date it is dated at or after (epoch seconds)."""

    topic: str = ""
    entity: str = ""
    since: float | None = None

    def __bool__(self) -> bool:
        return bool(self.topic or self.entity or self.since is not None)


def narrowing(topic: str = "", entity: str = "", since: str = "") -> Narrow | None:
    """A ``Narrow`` from the text of a CLI flag or an /api parameter; ``since`` is a day (YYYY-MM-DD,
    from its start in UTC) or an ISO instant. Raises ``ValueError`` on a date that does not parse."""
    stamp: float | None = None
    if since:
        when = datetime.fromisoformat(since)
        stamp = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    narrow = Narrow(topic=topic.strip(), entity=entity.strip(), since=stamp)
    return narrow or None


def norm_label(text: str) -> str:
    """A topic or an entity as it is stored and matched: lower case, single spaces, hyphens as spaces."""
    return " ".join(text.replace("-", " ").replace("_", " ").split()).casefold()


@dataclass(frozen=True, slots=True)
class ScopeFilter:
    """The bounds of one index read. Made only by ``scope_filter``; a backend translates its
    conditions one by one (``Match`` -> match-any, ...) and adds none, so what a read can see is
    decided in exactly one place."""

    scopes: tuple[str, ...]
    must: tuple[Condition, ...]

    def __post_init__(self) -> None:
        # A hand-built filter without the scope condition would be a read across users.
        if not self.scopes or not self.must or self.must[0] != Match("scope", self.scopes):
            raise ScopeRequiredError("a ScopeFilter must start with its scope condition (use scope_filter)")


def scope_filter(
    scopes: Sequence[str],
    *,
    now: float | None = None,
    path: str | None = None,
    kinds: Sequence[str] = (),
    ids: Sequence[str] = (),
    narrow: Narrow | None = None,
) -> ScopeFilter:
    """THE function that bounds every read of the index (queries, payloads, manifests, counts,
    scope deletes) to ``scopes``; ``now`` hides expired chunks, the others narrow further."""
    clean = tuple(require_scopes(scopes))
    must: list[Condition] = [Match("scope", clean)]
    if now is not None:
        must.append(AtLeast("valid_until", now))
    if path is not None:
        must.append(Match("path", (path,)))
    if kinds:
        must.append(Match("kind", tuple(kinds)))
    if ids:
        must.append(HasId(tuple(ids)))
    if narrow is not None:
        if narrow.topic:
            must.append(Match("topic", (norm_label(narrow.topic),)))
        if narrow.entity:
            must.append(Match("entities", (norm_label(narrow.entity),)))  # any element of the list
        if narrow.since is not None:
            must.append(AtLeast("ts", narrow.since))
    return ScopeFilter(clean, tuple(must))


class VectorIndex(ABC):
    """Writes are backend methods; every read is a method here that builds its ``ScopeFilter``
    first and only then calls the backend (``_query``, ``_scroll``, ``_count``, ``_delete``)."""

    backend: str

    @abstractmethod
    def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    @abstractmethod
    def delete_ids(self, ids: Sequence[str]) -> None: ...

    def delete_scope(self, scope: str) -> None:
        """Drop every point of one scope (a full rebuild starts with this)."""
        self._delete(scope_filter([scope]))

    def manifest(self, scope: str, path: str | None = None) -> dict[str, tuple[str, str]]:
        """``point id -> (path, content hash)`` of one scope (or one file of it): what incremental
        indexing compares against."""
        return {
            pid: (p.get("path", ""), p.get("hash", ""))
            for pid, p in self._scroll(scope_filter([scope], path=path), ["path", "hash"])
        }

    def count(self, scope: str | None = None) -> int:
        """Points of one scope, or of the whole index (a number, never content)."""
        return self._count(scope_filter([scope]) if scope is not None else None)

    def _search(
        self,
        *,
        scopes: Sequence[str],
        dense: list[float],
        sparse: SparseVec,
        limit: int,
        now: float,
        kinds: Sequence[str] = (),
        narrow: Narrow | None = None,
    ) -> tuple[list[Candidate], list[Candidate]]:
        """Dense and sparse candidates inside ``scopes`` (of ``kinds``, if given), not expired at ``now``.

        Private to ``gateway.memory.search.recall``, which is the one place that reads vectors. Candidates
        carry only ``CANDIDATE_FIELDS`` of their payload."""
        flt = scope_filter(scopes, now=now, kinds=kinds, narrow=narrow)
        # IDF over the caller's own scopes: one user's vocabulary never shapes another's ranking.
        return self._query(flt, scope_filter(scopes), dense, sparse, limit)

    def _payloads(self, *, scopes: Sequence[str], ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Full payloads of ``ids``; points outside ``scopes`` are left out. Private to recall."""
        flt = scope_filter(scopes, ids=ids)
        return dict(self._scroll(flt, True)) if ids else {}

    # ----------------------------------------------------------------- backend hooks (filtered)

    @abstractmethod
    def _query(
        self, flt: ScopeFilter, idf: ScopeFilter, dense: list[float], sparse: SparseVec, limit: int
    ) -> tuple[list[Candidate], list[Candidate]]:
        """One dense and one BM25 (IDF over ``idf``) top-``limit`` list, both inside ``flt``;
        the BM25 list is empty when ``sparse`` has no terms."""

    @abstractmethod
    def _scroll(self, flt: ScopeFilter, fields: list[str] | bool) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(point id, payload fields)`` of every point inside ``flt``."""

    @abstractmethod
    def _count(self, flt: ScopeFilter | None) -> int: ...

    @abstractmethod
    def _delete(self, flt: ScopeFilter) -> None: ...

    def flush(self) -> None:  # noqa: B027 - optional for backends that persist on their own
        pass

    def optimize(self) -> None:  # noqa: B027 - servers optimise in the background on their own
        """Build search structures (HNSW, payload indexes) for what was upserted so far."""

    def compact(self) -> None:  # noqa: B027 - a server vacuums deleted points with its own optimiser
        """Rewrite the stored points so deleted ones leave the files on disk (``kith users delete``)."""

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
    floor: DiskFloor | None = None,
) -> VectorIndex:
    """``url`` (``http(s)://...`` or ``:memory:``) selects qdrant-client, otherwise the embedded shard,
    which checks ``floor`` before opening and before every write (a Qdrant server minds its own disk)."""
    if url:
        from gateway.memory.search.index_client import ClientIndex

        return ClientIndex(url=url, api_key=api_key, dim=dim, collection=collection)
    if not path:
        raise ValueError("the embedded index needs a directory")
    from gateway.memory.search.index_edge import EdgeIndex

    return EdgeIndex(path, dim=dim, search_threads=search_threads, floor=floor)
