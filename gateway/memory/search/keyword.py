"""Keyword-only recall (seed 004): BM25 over a scope's files when the embedder or the index cannot load.

The vector index is a cache of the files (docs/memory.md): when it cannot be opened (a broken or
unreadable index directory, a model that does not load), the files are still there. Recall then
ranks the same chunks the indexer would make (``chunk.chunk_file``: session-log turns, file sections)
by Okapi BM25 over their words, computed here in Python, instead of returning nothing. No dense
vectors, no recency or speaker signals: the caller is told it is keyword only (``kith context``).

Cost: every query reads the scope's indexable files; chunks are kept per file, keyed by its size and
mtime, so a file is re-read and re-chunked only when it changed. A scope past ``MAX_SCOPE_BYTES`` of
indexable text is searched up to there (newest files first: sessions and dated memories carry
their date in the name).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.kinds import indexable
from gateway.memory.files.stores import Stores
from gateway.memory.search.chunk import Chunk, chunk_file
from gateway.memory.search.index import Narrow, norm_label
from gateway.memory.search.recall import Hit

MAX_SCOPE_BYTES = 32 * 1024 * 1024
_MAX_CACHED_FILES = 20_000
_K1 = 1.2
_B = 0.75
_WORD = re.compile(r"[^\W_]+")
# English words that say nothing about what a memory is about (BM25's IDF weighs them low anyway;
# dropping them keeps a query of only such words from ranking everything).
_STOP_WORDS = (
    "a an and are as at be but by do did does for from had has have he her his i if in is it its me my no "
    "not of on or our she so that the their them then there they this to was we were what when where which "
    "who why will with you your"
)
_STOP = frozenset(_STOP_WORDS.split())


def terms(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text.casefold()):
        if w in _STOP:
            continue
        for suffix in ("ing", "ed", "es", "s"):  # a crude stem: "sailing" meets "sail", "boats" "boat"
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w[: -len(suffix)]
                break
        out.append(w)
    return out


@dataclass(frozen=True, slots=True)
class _Doc:
    chunk: Chunk
    tf: Counter[str]
    length: int


class KeywordSearch:
    """BM25 over the indexable files of the scopes a query names (thread-safe)."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        self._files: OrderedDict[tuple[str, str], tuple[tuple[int, float], list[_Doc]]] = OrderedDict()
        self._lock = threading.Lock()

    def _docs(self, scope: str) -> list[_Doc]:
        store = self.stores.store_for(scope)
        try:
            entries = [e for e in store.files() if indexable(e.path)]
        except MemoryStoreError:
            return []
        entries.sort(key=lambda e: e.path, reverse=True)  # dated names: newest first
        docs: list[_Doc] = []
        total = 0
        for entry in entries:
            total += entry.size
            if total > MAX_SCOPE_BYTES:
                break
            key, stamp = (scope, entry.path), (entry.size, entry.mtime)
            with self._lock:
                cached = self._files.get(key)
            if cached is None or cached[0] != stamp:
                try:
                    chunks = chunk_file(entry.path, store.read(entry.path))
                except MemoryStoreError:
                    continue  # changed under us: the next query reads it
                parsed = [_Doc(c, Counter(t), len(t)) for c in chunks if (t := terms(c.text))]
                with self._lock:
                    self._files[key] = (stamp, parsed)
                    while len(self._files) > _MAX_CACHED_FILES:
                        self._files.popitem(last=False)
                cached = (stamp, parsed)
            docs.extend(cached[1])
        return docs

    def search(self, *, scopes: Sequence[str], query: str, k: int, now: float | None = None,
               kinds: Sequence[str] = (), narrow: Narrow | None = None) -> list[Hit]:  # fmt: skip
        """Top ``k`` chunks of ``scopes`` by BM25 for ``query`` (each scope's statistics its own)."""
        q = set(terms(query))
        if not q or k <= 0:
            return []
        at = time.time() if now is None else now
        scored: list[tuple[float, str, _Doc]] = []
        for scope in scopes:
            docs = [d for d in self._docs(scope) if (not kinds or d.chunk.kind in kinds) and d.chunk.valid_until > at
                    and _narrowed(d.chunk, narrow)]
            if not docs:
                continue
            n = len(docs)
            avg = sum(d.length for d in docs) / n
            df = Counter(t for d in docs for t in q if t in d.tf)
            idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in q if df[t]}
            for d in docs:
                s = sum(idf[t] * d.tf[t] * (_K1 + 1) / (d.tf[t] + _K1 * (1 - _B + _B * d.length / avg))
                        for t in idf if t in d.tf)  # fmt: skip
                if s > 0:
                    scored.append((s, scope, d))
        scored.sort(key=lambda x: (-x[0], x[2].chunk.chunk_id))
        seen: set[tuple[str, str]] = set()
        hits: list[Hit] = []
        for s, scope, d in scored:
            c = d.chunk
            if (scope, c.chunk_id) in seen:
                continue
            seen.add((scope, c.chunk_id))
            hits.append(Hit(text=c.text, source=c.path, scope=scope, date=c.date, score=s, chunk_id=c.chunk_id,
                            turn_ids=c.turn_ids, kind=c.kind, speaker=c.speaker, channel=c.channel,
                            session_id=c.session_id, topic=c.topic, entities=c.entities))  # fmt: skip
            if len(hits) >= k:
                break
        return hits


def _narrowed(chunk: Chunk, narrow: Narrow | None) -> bool:
    """``chunk`` passes ``narrow`` (the same conditions the index applies as a payload filter)."""
    if not narrow:
        return True
    if narrow.topic and chunk.topic != norm_label(narrow.topic):
        return False
    if narrow.entity and norm_label(narrow.entity) not in chunk.entities:
        return False
    return narrow.since is None or chunk.ts >= narrow.since
