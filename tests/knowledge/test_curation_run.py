"""curate() + rollback() through the real guarded MemoryStore: skip-write, audit, exact undo."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.memory.curation import Rails, curate, rollback
from gateway.memory.curation.audit import append_records, read_records
from gateway.memory.files.store import MemoryStore

# Deliberately not canonical: CRLF, trailing spaces, no final newline. Rollback must restore this
# byte for byte, and a no-op run must leave it alone.
ORIGINAL = (
    "# Alice  \r\n\r\n## Work\r\n- Engineer at Acme   \r\n- Bikes to work\r\n\r\n\r\n## Notes\r\n- Cat: Miso\r\n- Cello"
)


def raw(store: MemoryStore, rel: str = "USER.md") -> bytes:
    return (store.root / rel).read_bytes()


def audit_lines(store: MemoryStore) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (store.root / "USER.md.audit.jsonl").read_text().splitlines()]


def test_noop_run_does_not_rewrite_a_drifted_file_but_is_audited(store: MemoryStore) -> None:
    store.write("USER.md", ORIGINAL, source="test")
    before = (store.root / "USER.md").stat()
    result = curate(
        store,
        {
            "ops": [
                {"op": "append", "section": "Notes", "text": "cat: miso"},
                {"op": "remove", "section": "Work", "text": "x"},
            ]
        },
        run_id="r1",
    )
    assert not result.written and result.backup == ""
    assert raw(store) == ORIGINAL.encode() and (store.root / "USER.md").stat().st_mtime_ns == before.st_mtime_ns
    lines = audit_lines(store)
    assert [(r["type"], r.get("outcome")) for r in lines] == [
        ("op", "noop_dup"),
        ("op", "noop_no_match"),
        ("run", None),
    ]
    assert lines[-1]["written"] is False and lines[-1]["pre_sha256"] == lines[-1]["post_sha256"]
    assert rollback(store, "r1").status == "nothing_to_undo"


def test_audit_has_one_line_per_op_with_reasons_and_texts(store: MemoryStore) -> None:
    store.write("USER.md", ORIGINAL, source="test")
    ops = [
        {"op": "replace", "section": "Work", "old": "Bikes to work", "new": "Takes the tram"},
        {"op": "append", "section": "Secrets", "text": "x"},
        {"op": "append", "section": "Notes", "text": "Learning Spanish"},
    ]
    result = curate(store, ops, run_id="r2")
    assert result.written
    op_lines = [r for r in audit_lines(store) if r["type"] == "op"]
    assert [(r["run_id"], r["index"], r["outcome"]) for r in op_lines] == [
        ("r2", 0, "applied"), ("r2", 1, "rejected"), ("r2", 2, "applied"),
    ]  # fmt: skip
    assert op_lines[0]["before"] == "Bikes to work" and op_lines[0]["after"] == "Takes the tram"
    assert op_lines[1]["reason"].startswith("section_not_allowed") and op_lines[1]["op"]["section"] == "Secrets"
    assert store.read("USER.md").endswith("## Notes\n- Cat: Miso\n- Cello\n- Learning Spanish\n")


def test_rollback_restores_the_previous_file_exactly(store: MemoryStore) -> None:
    store.write("USER.md", ORIGINAL, source="test")
    nuke = [{"op": "remove_heading", "section": "Work"}, {"op": "remove_heading", "section": "Notes"}]
    nuke += [{"op": "remove", "section": "Work", "text": "Engineer at Acme"}]
    nuke += [{"op": "append", "section": "Notes", "text": "Prefers voice notes"}]
    result = curate(store, nuke, run_id="r3")
    assert result.written
    text = store.read("USER.md")
    assert "Bikes to work" in text and "Cat: Miso" in text  # budget of 1 (a quarter of 4): one bullet went
    assert "Engineer at Acme" not in text
    assert rollback(store, "r3").status == "restored"
    assert raw(store) == ORIGINAL.encode()
    assert rollback(store, "r3").status == "already_restored"
    assert audit_lines(store)[-1]["type"] == "rollback"


def test_rollback_refuses_to_drop_later_edits_unless_forced(store: MemoryStore) -> None:
    store.write("USER.md", ORIGINAL, source="test")
    curate(store, [{"op": "append", "section": "Notes", "text": "Loves jazz"}], run_id="r4")
    store.write("USER.md", store.read("USER.md") + "- hand edit\n", source="user")
    assert rollback(store, "r4").status == "conflict"
    assert rollback(store, "r4", force=True).status == "restored"
    assert raw(store) == ORIGINAL.encode()
    assert audit_lines(store)[-1]["forced"] is True


def test_rollback_of_a_run_on_a_missing_file_and_unknown_runs(store: MemoryStore) -> None:
    result = curate(store, [{"op": "append", "section": "Identity", "text": "Name is Alice"}], run_id="r5")
    assert result.written and store.read("USER.md") == "## Identity\n- Name is Alice\n"
    assert rollback(store, "r5").status == "restored" and not store.exists("USER.md")
    assert rollback(store, "r5").status == "already_restored"
    assert rollback(store, "nope").status == "unknown_run"


def test_rollback_detects_a_tampered_backup(store: MemoryStore) -> None:
    store.write("USER.md", ORIGINAL, source="test")
    result = curate(store, [{"op": "append", "section": "Notes", "text": "Loves jazz"}], run_id="r6")
    store.write(result.backup, "something else", source="attacker")
    assert rollback(store, "r6").status == "no_backup"
    assert "Loves jazz" in store.read("USER.md")


def test_rails_are_passed_through(store: MemoryStore) -> None:
    store.write("USER.md", ORIGINAL, source="test")
    result = curate(store, [{"op": "add_heading", "section": "Side Quests"}], rails=Rails(allow_new_sections=True))
    assert result.written and "## Side Quests" in store.read("USER.md")


def test_audit_is_trimmed_from_the_oldest_line(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    for i in range(50):
        append_records(
            store, "USER.md", [{"type": "op", "run_id": f"r{i}", "pad": "x" * 100}], source="t", max_bytes=1000
        )
    records = list(read_records(store, "USER.md"))
    assert 0 < len(records) < 10 and records[-1]["run_id"] == "r49"
    assert len((tmp_path / "USER.md.audit.jsonl").read_bytes()) <= 1000
