"""BM25 sparse vectors, computed in-process by Qdrant's own tokenizer (``qdrant_edge.Bm25``).

Documents get term-frequency weights with length normalisation; the IDF half of BM25 is applied by
the index at query time (``Modifier.Idf``), over the querying scope only. The same encoder feeds
both backends, so a chunk has identical sparse vectors whichever Qdrant stores it.
"""

from __future__ import annotations

import threading

import qdrant_edge as qe

from gateway.memory.index import SparseVec

# Memory chunks are short (a chat turn is ~20-40 tokens, a file section a few hundred): an average
# length near a turn's keeps long sections from drowning out the turn that actually answers.
DEFAULT_AVG_LEN = 64.0


class SparseEncoder:
    name = "bm25-en"

    def __init__(self, *, avg_len: float = DEFAULT_AVG_LEN) -> None:
        # English stemming and stop words (Qdrant's defaults): "ran" / "running" match "run".
        self._bm25 = qe.Bm25(qe.Bm25Config(avg_len=avg_len, language="english"))
        self._lock = threading.Lock()

    def document(self, text: str) -> SparseVec:
        with self._lock:
            v = self._bm25.embed_document(text)
        return SparseVec(list(v.indices), [float(x) for x in v.values])

    def query(self, text: str) -> SparseVec:
        with self._lock:
            v = self._bm25.embed_query(text)
        return SparseVec(list(v.indices), [float(x) for x in v.values])
