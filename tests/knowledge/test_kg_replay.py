"""Re-running a night after a crash never duplicates facts; the graph shares its DB file safely."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.memory.knowledge.graph import KnowledgeGraph

T0 = datetime(2024, 5, 1, tzinfo=UTC)
NIGHT = [
    ("alice", "lives_in", "Berlin", 0),
    ("alice", "lives_in", "Munich", 1),  # moved the same day: supersedes Berlin
    ("alice", "likes", "jazz", 0),
    ("Bob", "works_at", "Globex", 0),
    ("alice", "interested_in", "sourdough", 0),
]


def insert_night(kg: KnowledgeGraph, facts: list[tuple[str, str, str, int]], ref: str) -> list[str]:
    return [
        kg.add("alice", s, p, o, valid_from=T0 + timedelta(hours=h), source_type="extracted", source_ref=ref).status
        for s, p, o, h in facts
    ]


def snapshot(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT subject, predicate, object, valid_from, valid_until FROM kg_facts ORDER BY id"
    ).fetchall()
    conn.close()
    return rows


def test_replaying_a_whole_night_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with KnowledgeGraph(path) as kg:
        assert insert_night(kg, NIGHT, "sleep:alice:2024-05-01") == ["inserted"] * 5
    before = snapshot(path)
    with KnowledgeGraph(path) as kg:
        assert insert_night(kg, NIGHT, "sleep:alice:2024-05-01") == ["replayed"] * 5
    assert snapshot(path) == before
    assert [r[2] for r in before if r[4] is None] == ["Munich", "jazz", "Globex"]


def test_crash_mid_night_then_full_rerun_has_no_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    kg = KnowledgeGraph(path)
    insert_night(kg, NIGHT[:3], "sleep:alice:2024-05-01")
    # Simulated crash: an uncommitted write is in flight when the process dies.
    conn = kg.state.db  # type: ignore[attr-defined]  # the SQLite backend's own connection
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO kg_facts (user_id, subject, subject_key, predicate, object, object_key, valid_from, "
        "created_at) VALUES ('alice','Bob','bob','works_at','Globex','globex','x','x')"
    )
    conn.close()  # no COMMIT: SQLite rolls the half-done transaction back

    with KnowledgeGraph(path) as kg2:
        statuses = insert_night(kg2, NIGHT, "sleep:alice:2024-05-01")
        assert statuses == ["replayed"] * 3 + ["inserted"] * 2
        assert len(kg2.all()) == 5
        assert [f.object for f in kg2.timeline("alice") if f.predicate == "lives_in"] == ["Berlin", "Munich"]
        current = sorted(f.object for f in kg2.current("alice", as_of=T0 + timedelta(days=1)))
        assert current == ["Globex", "Munich", "jazz", "sourdough"]


def test_without_source_ref_an_exact_repeat_is_still_deduplicated(tmp_path: Path) -> None:
    with KnowledgeGraph(tmp_path / "s.sqlite") as kg:
        for _ in range(3):
            kg.add("alice", "alice", "likes", "jazz", valid_from=T0)
            kg.add("alice", "alice", "lives_in", "Munich", valid_from=T0)
        assert len(kg.all()) == 2


def test_shares_a_db_file_with_other_tables_and_connections(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode=WAL")
    other.execute("CREATE TABLE turns (seq INTEGER PRIMARY KEY, content TEXT)")
    other.execute("INSERT INTO turns (content) VALUES ('hello')")
    graphs = [KnowledgeGraph(path) for _ in range(2)]
    errors: list[BaseException] = []

    def worker(g: KnowledgeGraph, n: int) -> None:
        try:
            for i in range(25):
                g.add("alice", "alice", "likes", f"item {n} {i}", valid_from=T0)
                other_rows = g.current("alice", as_of=T0)
                assert other_rows
        except BaseException as exc:  # surfaced below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(g, n)) for n, g in enumerate(graphs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert other.execute("SELECT count(*) FROM kg_facts").fetchone() == (50,)
    assert other.execute("SELECT content FROM turns").fetchone() == ("hello",)
    assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    for g in graphs:
        g.close()
    other.close()


def test_parsed_night_replayed_after_crash_inserts_each_fact_once(tmp_path: Path) -> None:
    from gateway.memory.background.model_output import parse_extraction

    out = parse_extraction(
        "MEMORIES:\n- moved\nFACTS:\n"
        '[{"subject": "alice", "predicate": "lives_in", "object": "Berlin", "valid_from": "2024-05-01T08:00:00"},'
        ' {"subject": "alice", "predicate": "lives_in", "object": "Munich", "valid_from": "2024-05-01 18:00:00"},'
        ' {"subject": "alice", "predicate": "interested_in", "object": "bouldering"}]\nTOPICS:\n{"move": 1}'
    )
    assert out.errors == ()

    def night(kg: KnowledgeGraph) -> list[str]:
        return [
            kg.add("alice", f.subject, f.predicate, f.object, valid_from=f.valid_from or T0,
                   valid_until=f.valid_until, confidence=f.confidence, source_type="extracted",
                   source_ref="sleep:alice:2024-05-01").status
            for f in out.facts
        ]  # fmt: skip

    path = tmp_path / "state.sqlite"
    with KnowledgeGraph(path) as kg:
        assert night(kg) == ["inserted"] * 3
    with KnowledgeGraph(path) as kg:
        assert night(kg) == ["replayed"] * 3
        assert [f.object for f in kg.timeline("alice")] == ["bouldering", "Berlin", "Munich"]
        assert sorted(f.object for f in kg.current("alice", as_of="2024-05-02")) == ["Munich", "bouldering"]
