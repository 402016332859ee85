"""``EdgeIndex.compact``: deleted points leave the shard's files; the others keep their vectors and
payloads (search finds them as before)."""

from __future__ import annotations

import threading
from pathlib import Path

from gateway.memory.search.index import IndexPoint, SparseVec, point_id
from gateway.memory.search.index_edge import EdgeIndex

DIM = 8


def _point(scope: str, n: int, text: str) -> IndexPoint:
    dense = [0.0] * DIM
    dense[n % DIM] = 1.0
    return IndexPoint(id=point_id(scope, f"c{n}"), dense=dense, sparse=SparseVec([n + 1], [1.0]),
                      payload={"scope": scope, "path": f"f{n}.md", "hash": "h", "text": text, "ts": 0.0,
                               "kind": "file", "valid_until": 1e18})  # fmt: skip


def _files_with(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_compact_drops_deleted_payloads_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "edge"
    index = EdgeIndex(path, dim=DIM)
    try:
        index.upsert([_point("user:a", i, f"alice secret COMPACTCANARY{i}") for i in range(3)])
        index.upsert([_point("user:b", i, f"bob note KEEPME{i}") for i in range(3, 6)])
        index.flush()
        assert _files_with(path, b"COMPACTCANARY")
        before = index.manifest("user:b")

        index.delete_scope("user:a")
        index.flush()
        assert index.count("user:a") == 0
        assert _files_with(path, b"COMPACTCANARY"), "a delete only flags the point"

        index.compact()
        assert _files_with(path, b"COMPACTCANARY") == []
        assert _files_with(path, b"KEEPME4")
        assert index.count("user:b") == 3 and index.manifest("user:b") == before
        dense = [0.0] * DIM
        dense[4] = 1.0
        best, _ = index._search(scopes=["user:b"], dense=dense, sparse=SparseVec([5], [1.0]), limit=1, now=0.0)
        assert best[0].id == point_id("user:b", "c4")
        index.upsert([_point("user:b", 7, "written after")])  # the new shard takes writes
        assert index.count("user:b") == 4
        index.compact()  # and compacting again is fine
        assert index.count() == 4
    finally:
        index.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edge"]  # no .compact / .old left over
    reopened = EdgeIndex(path, dim=DIM)
    try:
        assert reopened.count("user:b") == 4
    finally:
        reopened.close()


def test_searches_during_compactions_never_fail(tmp_path: Path) -> None:
    """A forget compacts while the person goes on talking: every search running meanwhile answers
    (before, one that met the swap failed with "Shard is not initialized": a 500 on recall)."""
    index = EdgeIndex(tmp_path / "edge", dim=DIM)
    try:
        index.upsert([_point("user:b", i, f"note {i}") for i in range(200)])
        stop = threading.Event()
        failures: list[BaseException] = []
        answered = 0

        def search() -> None:
            nonlocal answered
            dense = [0.0] * DIM
            dense[3] = 1.0
            while not stop.is_set():
                try:
                    best, _ = index._search(scopes=["user:b"], dense=dense, sparse=SparseVec([4], [1.0]), limit=3,
                                            now=0.0)  # fmt: skip
                    assert best
                    answered += 1
                except BaseException as exc:
                    failures.append(exc)
                    return

        threads = [threading.Thread(target=search) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for _ in range(5):
                index.compact()
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert failures == [] and answered > 0
        assert index.count("user:b") == 200
    finally:
        index.close()
