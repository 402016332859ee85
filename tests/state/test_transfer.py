"""gateway.state.transfer: whole tables out of one state and into another, any backend pair, with
the same row counts and checksums on both sides (backup/restore and ``kith state migrate`` use it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.state import NewFact, State, TranscriptEntry, open_configured, open_state
from gateway.state.transfer import dump_tables, load_tables, table_checksums

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def fill(state: State, *, people: int = 3, turns: int = 20) -> None:
    """Rows in most tables, with the awkward values: NULLs, floats, unicode, quotes, percent signs."""
    for p in range(people):
        uid = f"u{p}"
        state.users.create(uid, display_name=f"Zoë '{p}' 100%", timezone="Europe/Berlin", at=T0)
        state.identities.add("telegram", str(1000 + p), uid, display_name="x", source="auto", at=T0)
        state.sessions.create(f"s{p}", user_id=uid, scope_key=f"user:{uid}", conversation_key=f"tg:{p}",
                              persona="default", at=T0)  # fmt: skip
        state.turns.append(*[
            TranscriptEntry(turn_id=f"t{p}-{i}", session_id=f"s{p}", user_id=uid, role="user" if i % 2 else "assistant",
                            content=f"turn {i} of {uid}: ünïcode ✓ \\ \"quoted\" ?", channel="telegram",
                            conversation_key=f"tg:{p}", speaker="", created_at=T0 + timedelta(seconds=i))
            for i in range(turns)
        ])  # fmt: skip
        state.knowledge.insert(NewFact(user_id=uid, subject="Sam", subject_key="sam", predicate="likes",
                                       object=f"tea {p}", object_key=f"tea {p}", valid_from=T0, valid_until=None,
                                       confidence=0.1 + p / 3, source_type="chat", source_ref="", replay_key=None,
                                       created_at=T0))  # fmt: skip
        state.usage.add(user_id=uid, day="2026-03-01", role="chat", provider="p", model="m", input_tokens=10,
                        output_tokens=3, cache_read_tokens=0, cache_write_tokens=0, cost_usd=0.1 * (p + 1))  # fmt: skip
    state.sessions.end("s0", T0)
    state.dedupe.mark_seen("telegram", "m1", T0)
    state.watermarks.set("memory", 7)


def test_a_copy_has_the_same_counts_checksums_and_next_keys(tmp_path: Path, state_url: str | None) -> None:
    source = open_state(tmp_path / "src" / "state.sqlite")
    fill(source)
    target = open_configured(tmp_path / "dst", state_url)
    try:
        counts = load_tables(target, dump_tables(source, batch=7))
        before = table_checksums(source)
        assert counts["turns"] == 60 and counts["kg_facts"] == 3
        assert table_checksums(target) == before
        assert before["turns"][0] == 60 and before["users"][0] == 3 and before["dedupe"][0] == 1
        # the copy goes on where the source stopped: the next transcript position follows the copied ones
        last = target.turns.last_seq()
        target.turns.append(TranscriptEntry(turn_id="new", session_id="s1", user_id="u1", role="user", content="new",
                                            channel="telegram", conversation_key="tg:1", speaker="",
                                            created_at=T0))  # fmt: skip
        assert target.turns.last_seq() == last + 1
        assert target.turns.search_sessions("u1", "ünïcode") == ["s1"]
        # and back again: a copy of the copy is the source plus that one row
        again = open_state(tmp_path / "back" / "state.sqlite")
        load_tables(again, dump_tables(target))
        after = table_checksums(again)
        assert after["turns"][0] == 61
        assert {t: v for t, v in after.items() if t != "turns"} == {t: v for t, v in before.items() if t != "turns"}
        again.close()
    finally:
        target.close()
        source.close()


def test_checksums_see_a_changed_value(any_state: State) -> None:
    fill(any_state, people=1, turns=2)
    before = table_checksums(any_state)
    any_state.users.set_display_name("u0", "changed")
    after = table_checksums(any_state)
    assert after["users"][0] == before["users"][0] and after["users"][1] != before["users"][1]
    assert {t for t in before if before[t] != after[t]} == {"users"}
