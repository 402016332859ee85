"""BM25 sparse vectors, computed in-process by Qdrant's own tokenizer (``qdrant_edge.Bm25``).

Documents get term-frequency weights with length normalisation; the IDF half of BM25 is applied by
the index at query time (``Modifier.Idf``), over the querying scope only. The same encoder feeds
both backends, so a chunk has identical sparse vectors whichever Qdrant stores it.
"""

from __future__ import annotations

import threading

import qdrant_edge as qe

from gateway.memory.search.index import SparseVec

# Memory chunks are short (a chat turn is ~20-40 tokens, a file section a few hundred): an average
# length near a turn's keeps long sections from drowning out the turn that actually answers.
DEFAULT_AVG_LEN = 64.0
# A turn's terms also carry the previous turn's at this weight: the answer "yes, on Sunday" should
# match a query with the words of the question it answers, but less than a turn that says them.
CONTEXT_WEIGHT = 0.3


class SparseEncoder:
    name = "bm25-en"

    def __init__(self, *, avg_len: float = DEFAULT_AVG_LEN) -> None:
        # English stemming and stop words (Qdrant's defaults): "ran" / "running" match "run".
        self._bm25 = qe.Bm25(qe.Bm25Config(avg_len=avg_len, language="english"))
        # Part of every stored chunk hash: changing these settings re-encodes chunks on the next sync.
        self.signature = f"{self.name}:{avg_len:g}:{CONTEXT_WEIGHT:g}"
        self._lock = threading.Lock()

    def document(self, text: str, context: str = "", context_weight: float = CONTEXT_WEIGHT) -> SparseVec:
        """Term weights of ``text``, plus those of ``context`` scaled down by ``context_weight``."""
        with self._lock:
            v = self._bm25.embed_document(text)
            c = self._bm25.embed_document(context) if context and context_weight else None
        weights = dict(zip(v.indices, (float(x) for x in v.values), strict=True))
        if c is not None:
            for i, x in zip(c.indices, c.values, strict=True):
                weights[i] = weights.get(i, 0.0) + context_weight * float(x)
        return SparseVec(list(weights), list(weights.values()))

    def query(self, text: str) -> SparseVec:
        with self._lock:
            v = self._bm25.embed_query(text)
        return SparseVec(list(v.indices), [float(x) for x in v.values])
