"""Hybrid recall: THE one function that reads the vector index.

Every query names its scopes (``user:<id>``, ``channel:<key>``, ``persona:<name>``); the index turns
them into a payload filter, so there is no code path that returns another person's memories.

Ranking: dense (semantic) and BM25 (exact words, names, dates) candidates are fused by a weighted sum
of per-list min-max normalised scores. Score-based fusion keeps how *much* better the best match is,
which rank-based RRF throws away; measured on LoCoMo dev it ranks gold turns markedly higher.
Turns next to other strong candidates of the same conversation get a share of their score
(``smooth_neighbours``). What the query says beyond its words adds to the score (``boost``): a
speaker it names, a time it names ("yesterday", on the person's calendar: ``query_dates``). Recency
then scales part of the score by an exponential half-life, and expired episodes (``valid_until`` in
the past) are filtered out inside the index. Every weight is chosen by the leave-one-conversation-out
search of ``kith bench locomo``, never on the pooled dev score.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from gateway.memory.search.index import Candidate, Narrow, SparseVec, VectorIndex, require_scopes
from gateway.memory.search.query_dates import TimeRange, time_ranges
from gateway.memory.search.sparse import SparseEncoder

if TYPE_CHECKING:  # numpy: loaded with the embedder, not by every importer of recall
    from gateway.memory.search.embed import Embedder

_DAY = 86400.0
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallSettings:
    # Defaults = gateway.config.MemoryConfig's, chosen by the leave-one-out search of `kith bench locomo`.
    dense_weight: float = 0.4
    sparse_weight: float = 0.6
    half_life_days: float = 180.0  # 0 disables recency decay
    recency_weight: float = 0.25  # share of the score that decays; old-but-exact memories still surface
    candidates: int = 50  # per list, before fusion
    neighbor_weight: float = 0.6  # share of the best nearby turn's score a turn inherits (0 = off)
    neighbor_window_s: float = 120.0  # "nearby": same session, at most this far apart in time
    speaker_weight: float = 0.6  # added to turns whose speaker the query names
    date_weight: float = 0.2  # added to memories dated inside a time range the query names
    diversity: float = 0.0  # score a hit loses per better-ranked hit of the same session (0 = off)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    text: str
    source: str  # store-relative path of the file the chunk came from
    scope: str
    date: str  # ISO timestamp the chunk is dated at ("" when undated)
    score: float
    chunk_id: str
    turn_ids: tuple[str, ...] = ()
    kind: str = "file"
    speaker: str = ""
    channel: str = ""
    session_id: str = ""
    topic: str = ""
    entities: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Query:
    """What ranking uses of the query text besides its vectors."""

    text: str
    words: frozenset[str]  # lower-cased words, to find speakers the query names
    ranges: tuple[TimeRange, ...]  # time ranges it names ("yesterday", "in May"), on the person's calendar

    @classmethod
    def parse(cls, text: str, at: float, tz: str | tzinfo | None = None) -> Query:
        return cls(text, frozenset(_WORD.findall(text.lower())), tuple(time_ranges(text, at, tz)))


@dataclass(frozen=True, slots=True)
class Retrieved:
    """The candidates of one query (dense and BM25 lists, best first) before any ranking."""

    dense: list[Candidate]
    bm25: list[Candidate]
    query: Query
    at: float  # the query's "now", epoch seconds


def recall(
    index: VectorIndex,
    embedder: Embedder,
    sparse: SparseEncoder,
    *,
    scopes: str | Sequence[str],
    query: str,
    k: int,
    now: float | datetime | None = None,
    settings: RecallSettings = RecallSettings(),
    kinds: Sequence[str] = (),
    tz: str | tzinfo | None = None,
    narrow: Narrow | None = None,
) -> list[Hit]:
    """Top ``k`` chunks for ``query`` inside ``scopes`` (only ``kinds``, e.g. ``("turn",)``, if given).

    ``tz`` is the person's time zone: "yesterday" in the query means their yesterday. Blocking: run
    it in a worker thread."""
    scope_list = require_scopes([scopes] if isinstance(scopes, str) else list(scopes))
    if k <= 0 or not query.strip():
        return []
    found = retrieve(
        index, embedder, sparse, scopes=scope_list, query=query, limit=max(settings.candidates, k),
        now=now, kinds=kinds, tz=tz, narrow=narrow,
    )
    top = rank(found, k=k, settings=settings)
    full = index._payloads(scopes=scope_list, ids=[cid for _s, cid, _p in top])
    # A point deleted between the two calls is simply left out.
    return [_hit(score, full[cid]) for score, cid, _p in top if cid in full]


def retrieve(
    index: VectorIndex,
    embedder: Embedder,
    sparse: SparseEncoder,
    *,
    scopes: Sequence[str],
    query: str,
    limit: int,
    now: float | datetime | None = None,
    kinds: Sequence[str] = (),
    tz: str | tzinfo | None = None,
    narrow: Narrow | None = None,
) -> Retrieved:
    """The two candidate lists of ``query`` (the index reads of a recall, without ranking)."""
    at = now.timestamp() if isinstance(now, datetime) else (time.time() if now is None else float(now))
    dense_q = embedder.embed_query(query).tolist()
    sparse_q = sparse.query(query)
    dense, bm25 = index._search(scopes=scopes, dense=dense_q, sparse=sparse_q, limit=limit, now=at, kinds=kinds,
                                 narrow=narrow)
    return Retrieved(dense, bm25, Query.parse(query, at, tz), at)


def rank(found: Retrieved, *, k: int, settings: RecallSettings = RecallSettings()) -> list[tuple[float, str, dict]]:  # type: ignore[type-arg]
    """The best ``k`` candidates as ``(score, point id, candidate payload)``, best first. Pure: the
    benchmark ranks the same candidates under many settings (bench/locomo.py, leave-one-out)."""
    n = max(settings.candidates, k)  # what ``recall`` asks the index for
    fused = fuse(found.dense[:n], found.bm25[:n], settings.dense_weight, settings.sparse_weight)
    if settings.neighbor_weight > 0:
        fused = smooth_neighbours(fused, settings.neighbor_weight, settings.neighbor_window_s)
    if settings.speaker_weight or settings.date_weight:
        fused = boost(fused, found.query, settings)
    scored = [(score * _recency(p.get("ts", 0.0), found.at, settings), cid, p) for cid, (score, p) in fused.items()]
    scored.sort(key=lambda t: (-t[0], t[1]))  # id as tie-break: identical results across rebuilds
    if settings.diversity > 0:
        return diversify(scored, k, settings.diversity)
    return scored[:k]


def fuse(
    dense: list[Candidate], bm25: list[Candidate], w_dense: float, w_sparse: float
) -> dict[str, tuple[float, dict]]:  # type: ignore[type-arg]
    out: dict[str, tuple[float, dict]] = {}  # type: ignore[type-arg]
    for weight, cands in ((w_dense, dense), (w_sparse, bm25)):
        if not cands or weight == 0:
            continue
        hi = max(c.score for c in cands)
        lo = min(c.score for c in cands)
        span = hi - lo
        for c in cands:
            # A lone candidate (or a list of equal scores) counts as fully relevant for its list.
            norm = (c.score - lo) / span if span > 1e-9 else 1.0
            prev = out.get(c.id)
            out[c.id] = ((prev[0] if prev else 0.0) + weight * norm, c.payload)
    return out


def smooth_neighbours(
    fused: dict[str, tuple[float, dict]],  # type: ignore[type-arg]
    weight: float,
    window_s: float,
) -> dict[str, tuple[float, dict]]:  # type: ignore[type-arg]
    """Each turn gains ``weight`` x the best score among turns of its session within ``window_s``.

    Conversation is local: the turn that answers is usually next to turns that match the query's
    words (the question, the follow-up), and relevant exchanges come in bursts. Only candidates
    already retrieved take part, so this reorders, it never adds unrelated turns.
    """
    sessions: dict[str, list[tuple[float, str, float]]] = {}
    for cid, (score, payload) in fused.items():
        if payload.get("session"):
            sessions.setdefault(payload["session"], []).append((float(payload.get("ts", 0.0)), cid, score))
    out = dict(fused)
    for items in sessions.values():
        if len(items) < 2:
            continue
        items.sort()
        for i, (ts, cid, score) in enumerate(items):
            best = 0.0
            j = i - 1
            while j >= 0 and ts - items[j][0] <= window_s:
                best = max(best, items[j][2])
                j -= 1
            j = i + 1
            while j < len(items) and items[j][0] - ts <= window_s:
                best = max(best, items[j][2])
                j += 1
            if best:
                out[cid] = (score + weight * best, fused[cid][1])
    return out


def boost(
    fused: dict[str, tuple[float, dict]],  # type: ignore[type-arg]
    query: Query,
    s: RecallSettings,
) -> dict[str, tuple[float, dict]]:  # type: ignore[type-arg]
    """Add ``speaker_weight`` to turns whose speaker the query names ("what did *Melanie* paint") and
    ``date_weight`` to memories dated inside a range it names ("last summer").

    Both are facts about the memory that its words and vector barely carry: a speaker's name is in
    half a conversation's turns (BM25 gives it little weight), and a date in the text is a string that
    "last summer" does not match. Additive, on fused scores in [0, 1]: they reorder candidates, never
    add any."""
    names: dict[str, bool] = {}
    out = {}
    for cid, (score, p) in fused.items():
        extra = 0.0
        who = p.get("speaker") or ""
        if s.speaker_weight and who:
            if who not in names:
                names[who] = any(len(w) > 2 and w in query.words for w in _WORD.findall(who.lower()))
            if names[who]:
                extra += s.speaker_weight
        ts = float(p.get("ts") or 0.0)
        if s.date_weight and ts and any(ts in r for r in query.ranges):
            extra += s.date_weight
        out[cid] = (score + extra, p)
    return out


def diversify(scored: list[tuple[float, str, dict]], k: int, penalty: float) -> list[tuple[float, str, dict]]:  # type: ignore[type-arg]
    """Greedy top ``k`` where each hit loses ``penalty`` per better-ranked hit of its own session.

    A question about several occasions ("what activities does Melanie do") has its evidence spread
    over sessions, while neighbour smoothing lifts whole bursts of one session: without this the top
    five can be one exchange. A single-answer question keeps its best hit first (no hit is ahead of
    it), and a strong second turn of the same session still beats a weak one elsewhere. Scores are
    kept as ranked (the penalty orders, it is not reported)."""
    # Hits of one session stay in score order, so each step only compares the head of every session.
    queues: dict[str, list[tuple[int, tuple[float, str, dict]]]] = {}  # type: ignore[type-arg]
    for pos, item in enumerate(scored[: max(4 * k, k + 20)]):
        # An unsessioned memory (a file) is its own group: nothing to diversify against.
        queues.setdefault(item[2].get("session") or item[1], []).append((pos, item))
    taken = dict.fromkeys(queues, 0)
    chosen: list[tuple[float, str, dict]] = []  # type: ignore[type-arg]

    def value(key: str) -> tuple[float, int]:
        pos, item = queues[key][taken[key]]
        return item[0] - penalty * taken[key], -pos  # equal values: the better-ranked first

    while len(chosen) < k and queues:
        key = max(queues, key=value)
        chosen.append(queues[key][taken[key]][1])
        taken[key] += 1
        if taken[key] == len(queues[key]):
            del queues[key]
    return chosen


def _recency(ts: float, now: float, s: RecallSettings) -> float:
    if s.half_life_days <= 0 or not ts:
        return 1.0
    age_days = max(now - float(ts), 0.0) / _DAY
    return 1.0 - s.recency_weight + s.recency_weight * 0.5 ** (age_days / s.half_life_days)


def _hit(score: float, p: dict) -> Hit:  # type: ignore[type-arg]
    return Hit(
        text=p.get("text", ""),
        source=p.get("path", ""),
        scope=p.get("scope", ""),
        date=p.get("date", ""),
        score=round(float(score), 6),
        chunk_id=p.get("cid", ""),
        turn_ids=tuple(p.get("turn_ids") or ()),
        kind=p.get("kind", "file"),
        speaker=p.get("speaker", ""),
        channel=p.get("channel", ""),
        session_id=p.get("session", ""),
        topic=p.get("topic", "") or "",
        entities=tuple(p.get("entities") or ()),
    )


__all__ = [
    "Hit", "Query", "RecallSettings", "Retrieved", "SparseVec", "boost", "diversify", "fuse", "rank", "recall",
    "retrieve", "smooth_neighbours",
]
