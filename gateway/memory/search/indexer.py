"""Keep the index in step with the Markdown files, re-embedding only what changed.

Each point's payload carries its chunk's content hash; indexing a file (or a whole root) compares
the fresh chunks with the stored ``id -> (path, hash)`` manifest, embeds new or changed chunks,
and deletes points whose chunk no longer exists (edited away, file deleted or renamed). A rebuild
is "drop the scope, then sync", which is why a rebuilt index answers exactly like the old one.
All methods block (embedding, Qdrant calls): the service runs them in worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.memory.files.errors import MemoryFileNotFoundError, MemoryStoreError
from gateway.memory.files.store import MemoryStore
from gateway.memory.search.chunk import Chunk, chunk_file
from gateway.memory.search.embed import Embedder
from gateway.memory.search.index import IndexPoint, VectorIndex, point_id
from gateway.memory.search.sparse import SparseEncoder

INDEXED_SUFFIXES = (".md", ".txt")


@dataclass(slots=True)
class IndexReport:
    embedded: int = 0
    unchanged: int = 0
    deleted: int = 0
    files: int = 0

    def __iadd__(self, other: IndexReport) -> IndexReport:
        self.embedded += other.embedded
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.files += other.files
        return self


def indexable(rel: str) -> bool:
    return rel.endswith(INDEXED_SUFFIXES) and not rel.endswith(".audit.jsonl")


class Indexer:
    def __init__(self, index: VectorIndex, embedder: Embedder, sparse: SparseEncoder) -> None:
        self.index = index
        self.embedder = embedder
        self.sparse = sparse

    def hash(self, chunk: Chunk) -> str:
        """What decides "unchanged": the chunk's content and how its vectors are made (each model
        has its own index; the signature tells apart ways of running one model, e.g. int8 or float)."""
        return f"{chunk.content_hash}/{self.sparse.signature}/{self.embedder.signature}"

    def points(self, scope: str, chunks: Sequence[Chunk]) -> list[IndexPoint]:
        dense = self.embedder.embed_documents([c.dense_text for c in chunks])
        return [
            IndexPoint(
                id=point_id(scope, c.chunk_id),
                dense=dense[i].tolist(),
                sparse=self.sparse.document(c.text, c.context),
                payload={
                    "scope": scope,
                    "path": c.path,
                    "cid": c.chunk_id,
                    "hash": self.hash(c),
                    "kind": c.kind,
                    "text": c.text,
                    "ts": c.ts,
                    "date": c.date,
                    "valid_until": c.valid_until,
                    "turn_ids": list(c.turn_ids),
                    "speaker": c.speaker,
                    "channel": c.channel,
                    "session": c.session_id,
                },
            )
            for i, c in enumerate(chunks)
        ]

    def apply(
        self, scope: str, chunks: Sequence[Chunk], manifest: dict[str, tuple[str, str]], *, purge: bool
    ) -> IndexReport:
        """Upsert ``chunks`` that are new or changed; with ``purge``, delete manifest points not in them."""
        report = IndexReport()
        wanted = {point_id(scope, c.chunk_id): c for c in chunks}
        todo = [c for pid, c in wanted.items() if manifest.get(pid, ("", ""))[1] != self.hash(c)]
        report.unchanged = len(wanted) - len(todo)
        for start in range(0, len(todo), 256):
            self.index.upsert(self.points(scope, todo[start : start + 256]))
        report.embedded = len(todo)
        if purge:
            gone = [pid for pid in manifest if pid not in wanted]
            self.index.delete_ids(gone)
            report.deleted = len(gone)
        return report

    def index_chunks(self, scope: str, chunks: Sequence[Chunk]) -> IndexReport:
        """Index units that arrive outside a file pass (live transcript turns); never deletes."""
        ids = {point_id(scope, c.chunk_id) for c in chunks}
        manifest = {pid: v for path in {c.path for c in chunks} for pid, v in self.index.manifest(scope, path).items()}
        return self.apply(scope, chunks, {k: v for k, v in manifest.items() if k in ids}, purge=False)

    def index_path(self, scope: str, store: MemoryStore, rel: str) -> IndexReport:
        """Bring one file's points up to date (the ``on_write`` seam; a job can call it too)."""
        manifest = self.index.manifest(scope, rel)
        try:
            chunks = self._chunks(store, rel) if indexable(rel) else []
        except MemoryFileNotFoundError:
            chunks = []  # deleted or renamed away: purge its points
        report = self.apply(scope, chunks, manifest, purge=True)
        report.files = 1
        return report

    def sync(self, scope: str, store: MemoryStore) -> IndexReport:
        """Incremental pass over a whole root: changed files re-embedded, vanished ones purged."""
        chunks, files = self._root_chunks(store)
        report = self.apply(scope, chunks, self.index.manifest(scope), purge=True)
        report.files = files
        return report

    def rebuild(self, scope: str, store: MemoryStore) -> IndexReport:
        """Re-embed every chunk of a root from its files, in place: points are overwritten by id and
        those no file produces any more are deleted afterwards, so recall keeps answering (with the
        old vectors, then the new ones) while a large root is rebuilt."""
        chunks, files = self._root_chunks(store)
        stale = {pid: ("", "") for pid in self.index.manifest(scope)}  # no hash matches: all re-embedded
        report = self.apply(scope, chunks, stale, purge=True)
        report.files = files
        return report

    def _root_chunks(self, store: MemoryStore) -> tuple[list[Chunk], int]:
        chunks: list[Chunk] = []
        files = 0
        for entry in store.files():
            if not indexable(entry.path):
                continue
            try:
                chunks.extend(self._chunks(store, entry.path))
                files += 1
            except MemoryStoreError:
                continue  # changed under us; the write that changed it queues its own re-index
        return _dedupe(chunks), files

    @staticmethod
    def _chunks(store: MemoryStore, rel: str) -> list[Chunk]:
        return chunk_file(rel, store.read(rel))


def _dedupe(chunks: list[Chunk]) -> list[Chunk]:
    # A turn copied into two logs would otherwise be two upserts of one id: keep the first.
    seen: dict[str, Chunk] = {}
    for c in chunks:
        seen.setdefault(c.chunk_id, c)
    return list(seen.values())
