"""Rebuild equivalence and incremental re-indexing after edits, deletes and renames (acceptance 4)."""

from __future__ import annotations

import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.memory.files.session_log import format_turn
from gateway.memory.files.store import MemoryStore, MemoryStoreError
from gateway.memory.search.service import MemoryService
from tests.memory.conftest import ServiceFactory

QUERIES = ["where does Alice like to hike", "what is the cat called", "dentist appointment", "Sam's dog",
           "quarterly report deadline", "what did we talk about in May"]  # fmt: skip


def _seed(store: MemoryStore) -> None:
    store.write("USER.md", "# Alice\n\nLoves hiking in the Dolomites. Her cat is called Miso.\n", source="t")
    store.write("people/sam.md", "# Sam\n\nSam has a beagle named Rex and works at the bakery.\n", source="t")
    long = "\n".join(f"## Week {w}\n\n" + " ".join(f"Worked on the quarterly report part {w}-{i}." for i in range(60))
                     for w in range(4))  # fmt: skip
    store.write("topics/work.md", f"# Work\n\nAlice's job notes.\n\n{long}\n", source="t")
    store.write("memories/2024-05-02.md", "- Booked a dentist appointment for 9 May.\n", source="t")
    ts = datetime(2024, 5, 1, 14, 3, tzinfo=UTC)
    log = format_turn(turn_id="t1", session_id="s1", channel="telegram", speaker="Alice",
                      text="We went to the lake with Sam and Rex today", timestamp=ts)  # fmt: skip
    store.append("sessions/2024-05-01.md", log, source="t")
    store.append(
        "sessions/2024-05-03.md",
        "# Sessions 2024-05-03\n\n## 10:00:00 · web · session abcd · turn t2\n\n**Alice:** Remind me about the"
        " dentist.\n\n**assistant:** Noted: dentist on 9 May.\n",
        source="t",
    )


async def _answers(svc: MemoryService) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        hits = await svc.recall(scope="user:alice", query=q, k=6, now=datetime(2024, 6, 1, tzinfo=UTC))
        out.append([(h.chunk_id, round(h.score, 4)) for h in hits])
    return out


async def test_deleting_the_index_and_rebuilding_gives_the_same_results(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    svc = await make_service("edge", data)
    _seed(svc.stores.for_user("alice"))
    await svc.indexing.drain()
    before = await _answers(svc)
    points = svc.scope_count("user:alice")
    assert points >= 9  # sections of the long file, turns, small files
    await svc.close()
    shutil.rmtree(data / "qdrant")
    svc2 = await make_service("edge", data)
    assert svc2.scope_count("user:alice") == 0
    report = await svc2.indexing.reindex("alice")
    assert report["user:alice"].embedded == points == svc2.scope_count("user:alice")
    assert await _answers(svc2) == before
    # A second, incremental pass finds nothing to re-embed.
    again = await svc2.indexing.sync("user:alice")
    assert again.embedded == 0 and again.deleted == 0 and again.unchanged > 0


@pytest.mark.parametrize("backend", ["edge", "memory"])
async def test_incremental_after_edit_delete_and_rename(make_service: ServiceFactory, backend: str) -> None:
    svc = await make_service(backend)
    store = svc.stores.for_user("alice")
    _seed(store)
    await svc.indexing.drain()
    count = svc.scope_count("user:alice")

    async def top(query: str) -> str:
        hits = await svc.recall(scope="user:alice", query=query, k=1)
        return hits[0].text if hits else ""

    # Edit: the new fact is found, the old one is gone, and only the edited file is re-embedded.
    embedded = svc.indexing.counters["embedded_chunks"]
    store.write("people/sam.md", "# Sam\n\nSam adopted a parrot called Kiwi.\n", source="t")
    await svc.indexing.drain()
    assert svc.indexing.counters["embedded_chunks"] == embedded + 1
    assert "Kiwi" in await top("Sam's parrot")
    assert not any("beagle" in h.text for h in await svc.recall(scope="user:alice", query="beagle Rex", k=20))

    # Append to a session log: only the new turn is embedded.
    embedded = svc.indexing.counters["embedded_chunks"]
    store.append("sessions/2024-05-01.md", format_turn(turn_id="t9", session_id="s1", channel="telegram",
                 speaker="Alice", text="Kiwi learned to whistle", timestamp=datetime(2024, 5, 1, 15, 0, tzinfo=UTC)),
                 source="t")  # fmt: skip
    await svc.indexing.drain()
    assert svc.indexing.counters["embedded_chunks"] == embedded + 1

    # Rename: the chunk follows the file.
    store.move("memories/2024-05-02.md", "memories/2024-05-04.md", source="t")
    await svc.indexing.drain()
    hits = await svc.recall(scope="user:alice", query="dentist appointment booked", k=10)
    sources = {h.source for h in hits}
    assert "memories/2024-05-04.md" in sources and "memories/2024-05-02.md" not in sources

    # Delete: its chunks are purged.
    store.delete("topics/work.md", source="t")
    await svc.indexing.drain()
    assert not any(h.source == "topics/work.md" for h in await svc.recall(scope="user:alice", query="quarterly", k=20))
    assert svc.scope_count("user:alice") < count + 1

    # Edits made behind the store's back (service stopped, a text editor) are caught by a sync.
    (store.root / "notes.md").write_text("Remember: the spare key is under the blue pot.\n")
    report = await svc.indexing.sync("user:alice")
    assert report.embedded == 1
    assert "spare key" in await top("where is the spare key")


_NAMES = ["a.md", "people/b.md", "memories/2024-01-02.md", "topics/c.md"]
_op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(_NAMES), st.lists(st.sampled_from(["cat", "Oslo", "jazz", "tea"]),
                                                                   min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.sampled_from(_NAMES), st.just([])),
    st.tuples(st.just("move"), st.sampled_from(_NAMES), st.sampled_from(_NAMES)),
    st.tuples(st.just("turn"), st.integers(0, 5), st.sampled_from(["cat", "Oslo", "jazz"])),
)  # fmt: skip


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=1, max_size=10))
async def test_incremental_state_equals_a_rebuild(
    make_service: ServiceFactory, tmp_path: Path, ops: list[tuple[str, Any, Any]]
) -> None:
    svc = await make_service("edge", tmp_path / f"d{uuid.uuid4().hex}")
    store = svc.stores.for_user("p")
    for kind, x, y in ops:
        try:
            if kind == "write":
                store.write(x, "# note\n\n" + " ".join(y) + "\n", source="t")
            elif kind == "delete":
                store.delete(x, source="t")
            elif kind == "move":
                store.move(x, y, source="t")
            else:
                ts = datetime(2024, 1, 2, 10, x, tzinfo=UTC)
                log = format_turn(turn_id=f"t{x}", session_id="s", channel="web", speaker="P", text=y, timestamp=ts)
                store.append("sessions/2024-01-02.md", log, source="t")
        except MemoryStoreError:
            continue  # deleting or moving a missing file, moving onto an existing one
    await svc.indexing.drain()
    index = svc.loader.require_index()
    incremental = index.manifest("user:p")
    await svc.indexing.reindex("p")
    assert index.manifest("user:p") == incremental


async def test_a_file_replaced_by_a_directory_leaves_the_index_without_a_retry(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    """A path that is no longer a regular file (a directory or link in its place) cannot be read, so
    its points go, as for a deleted file: re-indexing it succeeds instead of failing until a job
    dead-letters (the disk-full test's day log put /healthz in "memory jobs failing repeatedly")."""
    svc = await make_service("edge", tmp_path / "data")
    store = svc.stores.for_user("alice")
    store.write("topics/boat.md", "# Boat\n\nThe boat is moored at pier 7.\n", source="t")
    await svc.indexing.drain()
    assert svc.scope_count("user:alice") >= 1
    path = svc.stores.root_for("user:alice") / "topics" / "boat.md"
    path.unlink()
    path.mkdir()
    report = await svc.indexing.index_file("user:alice", "topics/boat.md")
    assert report.deleted >= 1 and svc.scope_count("user:alice") == 0


async def test_a_rebuild_queued_before_an_erase_does_not_bring_the_folder_back(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    """A rebuild job of a person erased meanwhile (`kith users delete` after `kith memory reindex`)
    opened their store, which created their folder again (seen in a full suite run)."""
    svc = await make_service("edge", tmp_path / "data")
    svc.stores.for_user("bob").write("USER.md", "# Bob\n\n- Sails on Sundays.\n", source="t")
    await svc.indexing.drain()
    root = svc.stores.root_for("user:bob")
    svc.stores.forget("user:bob")  # a fresh service (the job runs in a worker that never opened this store)
    shutil.rmtree(root)
    report = await svc.indexing.rebuild("user:bob")
    assert not root.exists() and report.embedded == 0 and svc.scope_count("user:bob") == 0
