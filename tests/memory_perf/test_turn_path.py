"""The per-turn cost of memory (issue 19): what embeds, how often, and at which priority.

No timings here (the machine is shared): the tests check the mechanisms, `kith bench turn` measures.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.memory.files.session_log import LogEntry, format_entry
from gateway.memory.files.store import MemoryStore
from gateway.memory.search import embed
from gateway.memory.search.chunk import chunk_file
from gateway.memory.search.embed import Vectors, background_executor, load_embedder
from gateway.memory.search.index import IndexPoint
from gateway.memory.search.index_client import ClientIndex
from gateway.memory.search.indexer import SLICE_S, Indexer
from gateway.memory.search.service import recall_threads
from gateway.memory.search.sparse import SparseEncoder
from gateway.testing import GatewayFactory, message, test_config

LOG = "sessions/2026-11-24.md"
T0 = datetime(2026, 11, 24, 8, tzinfo=UTC)


def _entries(first: int, n: int, *, sessions: int = 3, ids: Sequence[int] | None = None) -> str:
    return "".join(
        format_entry(LogEntry(turn_id=f"t{i}", session_id=f"s{i % sessions}", channel="websocket", speaker="Sam",
                              text=f"note {i} about the garden shed", timestamp=T0 + timedelta(seconds=i),
                              reply=f"reply {i}", reply_at=T0 + timedelta(seconds=i, milliseconds=5)))
        for i in (ids if ids is not None else range(first, first + n))
    )  # fmt: skip


class _Counting:
    """Wraps the real embedder: how many texts each call embedded, and in which mode."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.signature, self.dim = inner.name, inner.signature, inner.dim
        self.documents: list[tuple[int, bool]] = []

    def embed_documents(self, texts: Sequence[str], *, background: bool = False) -> Vectors:
        self.documents.append((len(texts), background))
        return self.inner.embed_documents(texts, background=background)  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)  # type: ignore[no-any-return]


@pytest.fixture
def indexer() -> Indexer:
    return Indexer(ClientIndex(url=":memory:", dim=384, collection="t"), _Counting(load_embedder("minilm-l6-int8")),
                   SparseEncoder())  # fmt: skip


async def test_core_mode_never_embeds(make_gateway: GatewayFactory, tmp_path: Path) -> None:
    """With the memory stages denied (`kith bench turn --core`), turns write the session log but
    nothing is embedded: no recall, no live indexing of the log."""
    deny = ["plugins.memory_index", "plugins.recall", "plugins.lore", "plugins.tools"]
    gw = await make_gateway(config=test_config(tmp_path / "data", plugins={"entry_points": False, "deny": deny}))
    for i in range(3):
        await gw.handle_inbound(message(f"hello number {i}"))
    await gw.settle()
    assert gw.memory is not None
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    store = gw.memory.stores.for_user(uid)
    assert [e.path for e in store.files() if e.path.startswith("sessions/")], "the turns were logged"
    assert gw.memory.indexing.counters["embedded_chunks"] == 0
    assert gw.memory.recalls == 0
    assert gw.memory.loader.index.count(f"user:{uid}") == 0


def test_query_vector_is_reused_for_the_same_text() -> None:
    """A text embedded as a query (the message a turn recalls with) is not run through the model
    again when it is indexed: one run per text, so the vector is the same either way."""
    emb = load_embedder("minilm-l6-int8")
    assert isinstance(emb, embed.MiniLMEmbedder) and emb.max_batch == 1
    text = f"the query vector is reused {os.getpid()} {threading.get_native_id()}"
    runs: list[int] = []
    forward = emb._forward

    def counted(seqs: Sequence[Sequence[int]]) -> Vectors:
        runs.append(len(seqs))
        return forward(seqs)

    q = emb.embed_query(text)
    emb._forward = counted  # type: ignore[method-assign]
    try:
        docs = emb.embed_documents([text, "another text, never seen before " + text], background=True)
    finally:
        del emb._forward
    assert runs == [1]  # only the unseen text ran
    assert np.array_equal(docs[0], q)
    # and the reused vector is exactly what a run of the model over the text gives
    assert np.array_equal(emb._forward(emb._encode([text]))[0], docs[0])


def test_background_embedding_runs_on_one_lower_priority_thread() -> None:
    ex = background_executor()
    assert ex is background_executor()  # one per process
    assert ex._max_workers == 1
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    theirs = ex.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
    assert theirs > mine or theirs == 19
    name = ex.submit(lambda: threading.current_thread().name).result()
    assert name.startswith("kith-embed-bg")


def test_live_indexing_upserts_in_slices_bounded_by_time(indexer: Indexer, tmp_path: Path) -> None:
    """A long background pass is upserted every SLICE_S of embedding, not in one go at the end."""
    now = [0.0]

    def clock() -> float:
        now[0] += SLICE_S / 2  # between two readings: a slice took half the time a slice may take
        return now[0]

    indexer.clock = clock
    batches: list[int] = []
    upsert = indexer.index.upsert

    def counted(points: Sequence[IndexPoint]) -> None:
        batches.append(len(points))
        upsert(points)

    indexer.index.upsert = counted  # type: ignore[method-assign]
    store = MemoryStore(tmp_path / "root")
    store.write(LOG, "# Sessions 2026-11-24\n" + _entries(0, 7), source="test")
    report = indexer.index_path("user:a", store, LOG, background=True)
    assert report.embedded == 7
    assert batches == [4, 3]  # the first slice, then one sized to the pace of the first (up to 8)
    store.append(LOG, _entries(7, 20), source="test")
    batches.clear()
    indexer.index_path("user:a", store, LOG, background=True)
    assert batches == [4, 8, 8]  # each later slice sized from the one before
    emb = indexer.embedder
    assert isinstance(emb, _Counting) and all(bg for _n, bg in emb.documents)


def test_appended_turns_alone_are_embedded(indexer: Indexer, tmp_path: Path) -> None:
    """A session log that grew by appended turns: only those are parsed and embedded, and the index
    ends up exactly as a full pass over the file would make it (ids, hashes, context)."""
    store = MemoryStore(tmp_path / "root")
    store.write(LOG, "# Sessions 2026-11-24\n" + _entries(0, 6), source="test")
    assert indexer.index_path("user:a", store, LOG, background=True).embedded == 6
    store.append(LOG, _entries(6, 4), source="test")
    # a turn logged twice (kept as its first occurrence) and a new session
    store.append(LOG, _entries(0, 0, ids=[2, 10]), source="test")
    emb = indexer.embedder
    assert isinstance(emb, _Counting)
    emb.documents.clear()
    report = indexer.index_path("user:a", store, LOG, background=True)
    assert report.embedded == 5 and report.unchanged == 0
    assert sum(n for n, _ in emb.documents) == 5
    stored = indexer.index.manifest("user:a", LOG)
    full = chunk_file(LOG, store.read(LOG))
    assert sorted(h for _p, h in stored.values()) == sorted(indexer.hash(c) for c in full)
    # nothing new: nothing embedded; an edit inside the file: the whole file is compared again
    emb.documents.clear()
    assert indexer.index_path("user:a", store, LOG, background=True).embedded == 0
    store.write(LOG, store.read(LOG).replace("note 3 about", "note three about"), source="test")
    report = indexer.index_path("user:a", store, LOG, background=True)
    # turn 3 and turn 6, the next of its session (turn 3 is its context)
    assert report.embedded == 2 and report.unchanged == len(full) - 2
    assert sorted(h for _p, h in indexer.index.manifest("user:a", LOG).values()) == \
        sorted(indexer.hash(c) for c in chunk_file(LOG, store.read(LOG)))


def test_a_log_with_older_blocks_is_always_read_whole(indexer: Indexer, tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "root")
    old = "# Sessions 2026-11-24\n\n## 08:00:00 · telegram · session s9 · turn old1\n\n**Sam:** an old block\n"
    store.write(LOG, old + _entries(0, 2), source="test")
    indexer.index_path("user:a", store, LOG)
    store.append(LOG, _entries(2, 2), source="test")
    report = indexer.index_path("user:a", store, LOG)
    assert report.unchanged == 3 and report.embedded == 2  # a full pass: the old block is compared too


def test_recall_leaves_the_event_loop_a_core() -> None:
    assert [recall_threads(True, n) for n in (1, 2, 4)] == [1, 1, 3]
    assert [recall_threads(False, n) for n in (1, 2, 4)] == [2, 2, 3]  # a server's queries mostly wait
