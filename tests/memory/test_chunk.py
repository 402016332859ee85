"""Chunking rules and the session-log formats."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from gateway.memory.files.session_log import format_turn, parse_session_log, session_log_path
from gateway.memory.search.chunk import NEVER, OVERLAP_WORDS, WINDOW_WORDS, chunk_file


def test_short_file_is_one_chunk() -> None:
    chunks = chunk_file("people/sam.md", "# Sam\n\nLikes jazz.\n")
    assert [(c.chunk_id, c.text, c.ts, c.valid_until) for c in chunks] == [
        ("f:people/sam.md#0", "# Sam\n\nLikes jazz.", 0.0, NEVER)]  # fmt: skip


def test_long_file_splits_per_h2_with_headings() -> None:
    body = " ".join(["word"] * 200)
    text = f"# Trip\n\nPreamble {body}\n\n## Day one\n\n{body}\n\n## Day two\n\nHiked {body}\n"
    texts = [c.text for c in chunk_file("topics/trip.md", text)]
    assert texts[0].startswith("Trip\n\nPreamble")
    assert texts[1].startswith("Trip / Day one\n\n") and texts[2].startswith("Trip / Day two\n\nHiked")
    assert len(texts) == 3


def test_long_sections_become_overlapping_windows() -> None:
    words = [f"w{i}" for i in range(2000)]
    text = "# Log\n\n## Notes\n\n" + " ".join(words) + "\n" + "## Other\n\nshort\n"
    chunks = [c.text for c in chunk_file("notes.md", text) if c.text.startswith("Log / Notes")]
    assert len(chunks) >= 3
    first, second = (c.split("\n\n", 1)[1].split() for c in chunks[:2])
    assert len(first) == WINDOW_WORDS and first[-OVERLAP_WORDS:] == second[:OVERLAP_WORDS]
    assert "w1999" in chunks[-1]


def test_dated_files_and_expiry() -> None:
    (c,) = chunk_file("memories/2024-05-02.md", "- trip to Rome\nExpires: 2024-06-01\n")
    assert c.ts == datetime(2024, 5, 2, tzinfo=UTC).timestamp()
    assert c.valid_until == datetime(2024, 6, 1, tzinfo=UTC).timestamp()


def test_turn_units_carry_date_speaker_channel_and_context() -> None:
    ts = datetime(2024, 5, 1, 14, 3, tzinfo=UTC)
    log = format_turn(turn_id="t1", session_id="s", channel="telegram", speaker="Ann", text="Q?", timestamp=ts)
    log += format_turn(turn_id="t2", session_id="s", channel="telegram", speaker="Bo", text="A!", timestamp=ts)
    a, b = chunk_file(session_log_path(ts), log)
    assert a.text == "[Wednesday 1 May 2024 14:03] Ann (telegram): Q?"
    assert (b.chunk_id, b.turn_ids, b.context, b.session_id) == ("t:t2", ("t2",), "Ann: Q?", "s")


def test_gateway_plugin_log_format() -> None:
    text = (
        "# Sessions 2024-05-03\n\n## 10:00:05 · web · session abcd · turn t2\n\n**Alice:** Remind me.\nMore.\n\n"
        "**assistant:** Noted.\n\n## 10:01 · web · session abcd · turn t3\n\n**Alice:** Thanks\n"
    )
    a, b = chunk_file("sessions/2024-05-03.md", text)
    assert a.text == "[Friday 3 May 2024 10:00] Alice (web): Remind me.\nMore.\nassistant: Noted."
    assert a.date == "2024-05-03T10:00:05+00:00" and b.context.startswith("Alice: Remind me.")


@given(
    turns=st.lists(
        st.tuples(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=12), st.text(max_size=80)),
        min_size=1,
        max_size=5,
    )
)
def test_session_log_round_trip(turns: list[tuple[str, str, str]]) -> None:
    ts = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    log = "".join(
        format_turn(turn_id=f"id {i} {tid}", session_id="s", channel="c h", speaker=spk, text=txt, timestamp=ts)
        for i, (tid, spk, txt) in enumerate(turns)
    )
    parsed = parse_session_log(log)
    assert [(p.turn_id, p.speaker, p.timestamp) for p in parsed] == [
        (f"id {i} {tid}", spk, ts) for i, (tid, spk, _) in enumerate(turns)]  # fmt: skip
    for p, (_, _, txt) in zip(parsed, turns, strict=True):
        if "#" not in txt and "<" not in txt:
            assert p.text == txt.strip()
