"""Keep the index in step with the Markdown files, re-embedding only what changed.

Each point's payload carries its chunk's content hash; indexing a file (or a whole root) compares
the fresh chunks with the stored ``id -> (path, hash)`` manifest, embeds new or changed chunks,
and deletes points whose chunk no longer exists (edited away, file deleted or renamed). A rebuild
is "drop the scope, then sync", which is why a rebuilt index answers exactly like the old one.
All methods block (embedding, Qdrant calls): the service runs them in worker threads.

Live indexing (``background=True``: a file a write reported, the start-up sync) must not compete
with the turns being served: its embedding runs on the one low-priority embedding thread, and
its points are upserted in slices of at most ``SLICE_S`` of embedding, so a large pass becomes
searchable bit by bit and never holds the interpreter for long. A session log only ever grows by
appended turns: its last pass is remembered (``_LogTail``), and the next one parses and embeds only
the turns appended since, instead of the whole day's log at every flush.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gateway.memory.files.errors import MemoryFileNotFoundError, MemoryStoreError, NotAFileError
from gateway.memory.files.kinds import indexable
from gateway.memory.files.session_log import TurnRecord, parse_current, starts_with_marker
from gateway.memory.files.store import MemoryStore
from gateway.memory.search.chunk import Chunk, chunk_file, turn_chunk
from gateway.memory.search.index import IndexPoint, VectorIndex, point_id
from gateway.memory.search.sparse import SparseEncoder

if TYPE_CHECKING:  # numpy: loaded with the embedder, not by every importer of the indexer
    from gateway.memory.search.embed import Embedder

SLICE_S = 0.25  # live indexing upserts what it has embedded about this often
SLICE_MAX = 256  # and at most this many points at once
SLICE_FIRST = 4  # texts in a pass's first slice, before its pace is known
_TAILS = 512  # session logs whose last pass is remembered


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


@dataclass(slots=True)
class _LogTail:
    """What the last pass over a session log saw and indexed: the length and digest of its text,
    the chunk ids it held and each session's last turn (the dense context of that session's next)."""

    size: int
    digest: bytes
    ids: set[str] = field(default_factory=set)
    last: dict[str, TurnRecord] = field(default_factory=dict)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class Indexer:
    def __init__(
        self, index: VectorIndex, embedder: Embedder, sparse: SparseEncoder,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.sparse = sparse
        self.clock = clock  # bounds live indexing's slices (tests pass their own)
        self._tails: OrderedDict[tuple[str, str], _LogTail] = OrderedDict()
        self._tails_lock = threading.Lock()

    def hash(self, chunk: Chunk) -> str:
        """What decides "unchanged": the chunk's content and how its vectors are made (each model
        has its own index; the signature tells apart ways of running one model, e.g. int8 or float)."""
        return f"{chunk.content_hash}/{self.sparse.signature}/{self.embedder.signature}"

    def points(self, scope: str, chunks: Sequence[Chunk], *, background: bool = False) -> list[IndexPoint]:
        dense = self.embedder.embed_documents([c.dense_text for c in chunks], background=background)
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
                    "topic": c.topic,
                    "entities": list(c.entities),
                },
            )
            for i, c in enumerate(chunks)
        ]

    def apply(
        self, scope: str, chunks: Sequence[Chunk], manifest: dict[str, tuple[str, str]], *, purge: bool,
        background: bool = False,
    ) -> IndexReport:
        """Upsert ``chunks`` that are new or changed; with ``purge``, delete manifest points not in them."""
        report = IndexReport()
        wanted = {point_id(scope, c.chunk_id): c for c in chunks}
        todo = [c for pid, c in wanted.items() if manifest.get(pid, ("", ""))[1] != self.hash(c)]
        report.unchanged = len(wanted) - len(todo)
        if background:
            self._upsert_sliced(scope, todo)
        else:
            for start in range(0, len(todo), SLICE_MAX):
                self.index.upsert(self.points(scope, todo[start : start + SLICE_MAX]))
        report.embedded = len(todo)
        if purge:
            gone = [pid for pid in manifest if pid not in wanted]
            self.index.delete_ids(gone)
            report.deleted = len(gone)
        return report

    def _upsert_sliced(self, scope: str, todo: Sequence[Chunk]) -> None:
        """Embed on the background thread and upsert in slices of about ``SLICE_S`` of work (at
        most ``SLICE_MAX`` points), each slice sized from the pace of the one before: a long pass
        becomes searchable bit by bit, and each slice is one hand-over to the background thread
        (on a loaded machine every wake-up of a thread waits its turn for a core)."""
        size, done = SLICE_FIRST, 0
        while done < len(todo):
            part = todo[done : done + size]
            started = self.clock()
            self.index.upsert(self.points(scope, part, background=True))
            spent = self.clock() - started
            done += len(part)
            size = SLICE_MAX if spent <= 0 else max(1, min(SLICE_MAX, int(len(part) * SLICE_S / spent)))

    def index_chunks(self, scope: str, chunks: Sequence[Chunk]) -> IndexReport:
        """Index units that arrive outside a file pass (live transcript turns); never deletes."""
        ids = {point_id(scope, c.chunk_id) for c in chunks}
        manifest = {pid: v for path in {c.path for c in chunks} for pid, v in self.index.manifest(scope, path).items()}
        return self.apply(scope, chunks, {k: v for k, v in manifest.items() if k in ids}, purge=False)

    def index_path(self, scope: str, store: MemoryStore, rel: str, *, background: bool = False) -> IndexReport:
        """Bring one file's points up to date (the ``on_write`` seam; a job can call it too)."""
        key = (scope, rel)
        try:
            text = store.read(rel) if indexable(rel) else None
        except (MemoryFileNotFoundError, NotAFileError):
            # Deleted or renamed away, or no longer a regular file (a directory or a link in its
            # place): nothing there can be read, so nothing stays indexed. Retrying could not help.
            text = None
        if text is not None and rel.startswith("sessions/"):
            appended = self._appended(key, text)
            if appended is not None:
                chunks, tail = appended
                report = self.apply(scope, chunks, {}, purge=False, background=background)
                self._remember(key, tail)
                report.files = 1
                return report
        self._forget(key)
        manifest = self.index.manifest(scope, rel)
        chunks = chunk_file(rel, text) if text is not None else []
        report = self.apply(scope, chunks, manifest, purge=True, background=background)
        if text is not None and rel.startswith("sessions/"):
            self._remember(key, self._seen(rel, text))
        report.files = 1
        return report

    # ----------------------------------------------------------------------- session log tails

    def _appended(self, key: tuple[str, str], text: str) -> tuple[list[Chunk], _LogTail] | None:
        """The chunks of the turns appended to a session log since its last pass, and what this
        pass saw; None when that is not all that changed (then the whole file is compared)."""
        with self._tails_lock:
            tail = self._tails.get(key)
        if tail is None or len(text) < tail.size or not text or _digest(text[: tail.size]) != tail.digest:
            return None
        piece = text[tail.size :]
        if not piece.strip():
            return [], tail
        if not starts_with_marker(piece) or not (text[: tail.size].endswith("\n") or piece.startswith("\n")):
            return None
        records = parse_current(piece)
        if records is None:
            return None
        ids, last = set(tail.ids), dict(tail.last)
        chunks = []
        for rec in records:
            # As chunk_file does it: the previous turn of the session is context, a turn logged twice
            # is indexed as its first occurrence, every unit belongs to the file it is in.
            c = replace(turn_chunk(rec, last.get(rec.session_id)), path=key[1])
            last[rec.session_id] = rec
            if c.chunk_id not in ids:
                ids.add(c.chunk_id)
                chunks.append(c)
        return chunks, _LogTail(len(text), _digest(text), ids, last)

    @staticmethod
    def _seen(rel: str, text: str) -> _LogTail | None:
        """What a full pass over a session log saw, when later passes can take only its tail."""
        records = parse_current(text)
        if not records:
            return None  # older formats, or no turns (the file is then chunked as a plain file)
        last: dict[str, TurnRecord] = {}
        for rec in records:
            last[rec.session_id] = rec
        return _LogTail(len(text), _digest(text), {f"t:{r.turn_id}" for r in records}, last)

    def _remember(self, key: tuple[str, str], tail: _LogTail | None) -> None:
        with self._tails_lock:
            if tail is None:
                self._tails.pop(key, None)
                return
            self._tails[key] = tail
            self._tails.move_to_end(key)
            while len(self._tails) > _TAILS:
                self._tails.popitem(last=False)

    def _forget(self, key: tuple[str, str] | None = None, scope: str | None = None) -> None:
        with self._tails_lock:
            if key is not None:
                self._tails.pop(key, None)
            if scope is not None:
                for k in [k for k in self._tails if k[0] == scope]:
                    del self._tails[k]

    def forget_scope(self, scope: str) -> None:
        """The scope's points were dropped or rewritten outside ``index_path`` (purge, rebuild): the
        next pass over each of its logs compares the whole file again."""
        self._forget(scope=scope)

    def sync(self, scope: str, store: MemoryStore, *, background: bool = False) -> IndexReport:
        """Incremental pass over a whole root: changed files re-embedded, vanished ones purged."""
        self.forget_scope(scope)
        chunks, files = self._root_chunks(store)
        report = self.apply(scope, chunks, self.index.manifest(scope), purge=True, background=background)
        report.files = files
        return report

    def rebuild(self, scope: str, store: MemoryStore) -> IndexReport:
        """Re-embed every chunk of a root from its files, in place: points are overwritten by id and
        those no file produces any more are deleted afterwards, so recall keeps answering (with the
        old vectors, then the new ones) while a large root is rebuilt."""
        self.forget_scope(scope)
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
