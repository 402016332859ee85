"""Hybrid recall: THE one function that reads the vector index.

Every query names its scopes (``user:<id>``, ``channel:<key>``, ``persona:<name>``); the index turns
them into a payload filter, so there is no code path that returns another person's memories.

Ranking: dense (semantic) and BM25 (exact words, names, dates) candidates are fused by a weighted sum
of per-list min-max normalised scores. Score-based fusion keeps how *much* better the best match is,
which rank-based RRF throws away; measured on LoCoMo dev it ranks gold turns markedly higher.
Turns next to other strong candidates of the same conversation get a share of their score
(``smooth_neighbours``). Recency then scales part of the score by an exponential half-life, and
expired episodes (``valid_until`` in the past) are filtered out inside the index.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.memory.search.embed import Embedder
from gateway.memory.search.index import Candidate, SparseVec, VectorIndex, require_scopes
from gateway.memory.search.sparse import SparseEncoder

_DAY = 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallSettings:
    dense_weight: float = 0.5
    sparse_weight: float = 0.5
    half_life_days: float = 180.0  # 0 disables recency decay
    recency_weight: float = 0.25  # share of the score that decays; old-but-exact memories still surface
    candidates: int = 50  # per list, before fusion
    neighbor_weight: float = 0.3  # share of the best nearby turn's score a turn inherits (0 = off)
    neighbor_window_s: float = 300.0  # "nearby": same session, at most this far apart in time


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
) -> list[Hit]:
    """Top ``k`` chunks for ``query`` inside ``scopes`` (only ``kinds``, e.g. ``("turn",)``, if given).

    Blocking: run it in a worker thread."""
    scope_list = require_scopes([scopes] if isinstance(scopes, str) else list(scopes))
    if k <= 0 or not query.strip():
        return []
    at = now.timestamp() if isinstance(now, datetime) else (time.time() if now is None else float(now))
    dense_q = embedder.embed_query(query).tolist()
    sparse_q = sparse.query(query)
    limit = max(settings.candidates, k)
    dense, bm25 = index._search(scopes=scope_list, dense=dense_q, sparse=sparse_q, limit=limit, now=at, kinds=kinds)
    fused = fuse(dense, bm25, settings.dense_weight, settings.sparse_weight)
    if settings.neighbor_weight > 0:
        fused = smooth_neighbours(fused, settings.neighbor_weight, settings.neighbor_window_s)
    scored = []
    for cid, (score, payload) in fused.items():
        scored.append((score * _recency(payload.get("ts", 0.0), at, settings), cid, payload))
    scored.sort(key=lambda t: (-t[0], t[1]))  # id as tie-break: identical results across rebuilds
    top = scored[:k]
    full = index._payloads(scopes=scope_list, ids=[cid for _s, cid, _p in top])
    # A point deleted between the two calls is simply left out.
    return [_hit(score, full[cid]) for score, cid, _p in top if cid in full]


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
    )


__all__ = ["Hit", "RecallSettings", "SparseVec", "fuse", "recall", "smooth_neighbours"]
