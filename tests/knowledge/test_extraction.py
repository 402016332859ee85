"""Model output parsing: good output, and every kind of garbage, degrade into a typed result."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.memory.background.model_output import (
    MAX_INPUT_CHARS,
    MAX_MEMORIES,
    parse_extraction,
    parse_writer_output,
)

GOOD = """Here is the extraction.

**MEMORIES:**
- Alice finished the first draft of her thesis.
* Went climbing with Bob on Saturday.
none

FACTS:
```json
[
  {"subject": "alice", "predicate": "Lives In", "object": "Munich", "valid_from": "2024-05-01"},
  {"subject": "Bob", "predicate": "works_at", "object": "Globex", "confidence": 0.7},
  ["alice", "likes", "bouldering"]
]
```

## TOPICS:
{"thesis": 0.6, "climbing": 0.4}
"""


def test_well_formed_output() -> None:
    r = parse_extraction(GOOD)
    assert r.errors == () and not r.truncated
    assert r.memories == ("Alice finished the first draft of her thesis.", "Went climbing with Bob on Saturday.")
    assert [(f.subject, f.predicate, f.object) for f in r.facts] == [
        ("alice", "lives_in", "Munich"), ("Bob", "works_at", "Globex"), ("alice", "likes", "bouldering"),
    ]  # fmt: skip
    assert r.facts[0].valid_from == "2024-05-01 00:00:00.000000" and r.facts[1].confidence == 0.7
    assert r.topics == {"thesis": 0.6, "climbing": 0.4} and r.dominant_topic() == "thesis"


def test_bad_json_is_salvaged_object_by_object() -> None:
    text = GOOD.replace('"Globex", "confidence": 0.7}', '"Globex", "confidence": 0.7},,,}')
    r = parse_extraction(text)
    assert [f.object for f in r.facts] == ["Munich", "Globex"]  # the list triple is not an object
    assert any(e.startswith("FACTS: invalid JSON") for e in r.errors)
    assert r.memories and r.topics


def test_missing_sections_are_reported_not_fatal() -> None:
    r = parse_extraction("MEMORIES:\n- Only memories today\n")
    assert r.memories == ("Only memories today",) and r.facts == () and r.topics == {}
    assert set(r.errors) == {"section FACTS missing", "section TOPICS missing"}
    empty = parse_extraction("I'm sorry, I can't help with that.")
    assert empty.empty and len(empty.errors) == 3


def test_truncated_text_keeps_what_was_complete() -> None:
    cut = GOOD[: GOOD.index('"Globex"') + 5]
    r = parse_extraction(cut)
    assert r.memories and [f.object for f in r.facts] == ["Munich"]
    assert "section TOPICS missing" in r.errors
    cut_map = parse_extraction('MEMORIES:\n- x\nFACTS:\n[]\nTOPICS:\n{"thesis": 0.6, "climbing": 0.4, "cook')
    assert cut_map.topics == {"thesis": 0.6, "climbing": 0.4}


def test_ten_times_expected_size_is_capped() -> None:
    lines = "\n".join(f"- memory number {i} " + "x" * 50 for i in range(2_000))
    facts = json.dumps([{"subject": "a", "predicate": "likes", "object": f"thing {i}"} for i in range(5_000)])
    r = parse_extraction(f"MEMORIES:\n{lines}\nFACTS:\n{facts}\nTOPICS:\n{{}}")
    assert r.truncated and any("only the first" in e for e in r.errors)
    assert len(r.memories) == MAX_MEMORIES
    assert r.facts == ()  # FACTS began past the cap: never read
    huge_line = parse_extraction("MEMORIES:\n- " + "y" * 5_000 + "\nFACTS:\n[]\nTOPICS:\n{}")
    assert len(huge_line.memories[0]) <= 401 and any("was cut" in e for e in huge_line.errors)


def test_invalid_items_are_skipped_with_reasons() -> None:
    facts = [
        {"subject": "a", "predicate": "likes"},
        {"subject": "a", "predicate": "--", "object": "b"},
        {"subject": ["a"], "predicate": "likes", "object": "b"},
        {"subject": "a", "predicate": "likes", "object": "z" * 301},
        {"subject": "a", "predicate": "visiting", "object": "Rome", "valid_from": "soon", "valid_until": "2024-13-01"},
        {"subject": "a", "predicate": "visiting", "object": "Oslo",
         "valid_from": "2024-02-01", "valid_until": "2024-01-01"},
        {"subject": "a", "predicate": "likes", "object": "tea", "confidence": "very"},
        "a likes tea",
    ]  # fmt: skip
    r = parse_extraction("MEMORIES:\nFACTS:\n" + json.dumps(facts) + '\nTOPICS:\n{"x": "high", "y": 2, "z": true}')
    assert [(f.object, f.valid_from, f.valid_until, f.confidence) for f in r.facts] == [
        ("Rome", None, None, 1.0), ("Oslo", "2024-02-01 00:00:00.000000", None, 1.0), ("tea", None, None, 1.0),
    ]  # fmt: skip
    assert r.topics == {"y": 2.0}
    assert sum(e.startswith("FACTS[") for e in r.errors) == 8
    assert sum(e.startswith("TOPICS: entry") for e in r.errors) == 2


def test_prose_lines_that_look_like_labels_do_not_start_sections() -> None:
    r = parse_writer_output("SUMMARY:\nWe chatted.\nTopics: we discussed climbing and tea.\nPEOPLE:\n[]\nTOPICS:\n[]")
    assert r.summary == "We chatted.\nTopics: we discussed climbing and tea." and r.errors == ()


WRITER = """SUMMARY:
Alice and Bob planned a climbing trip.

PEOPLE:
[{"slug": "telegram-123", "name": "Bob", "aliases": ["Bobby", "Bobby", 7], "content": "# Bob\\nClimbs."},
 {"slug": "../../etc/passwd", "name": "Evil", "content": "x"},
 {"slug": "discord-9", "name": "Carol", "content": "   "}]

TOPICS:
[{"title": "Climbing Trips!", "content": "# Climbing\\nFontainebleau in May."},
 {"slug": "ok-slug", "title": "T", "content": "text"}]
"""


def test_writer_output_with_unsafe_and_empty_entries() -> None:
    r = parse_writer_output(WRITER)
    assert r.summary == "Alice and Bob planned a climbing trip."
    assert [(p.slug, p.title, p.aliases) for p in r.people] == [("telegram-123", "Bob", ("Bobby",))]
    assert [(t.slug, t.content) for t in r.topics] == [
        ("climbing-trips", "# Climbing\nFontainebleau in May.\n"), ("ok-slug", "text\n"),
    ]  # fmt: skip
    assert len(r.errors) == 2 and all(e.startswith("PEOPLE[") for e in r.errors)


def test_writer_output_garbage() -> None:
    for garbage in (None, 42, "", "PEOPLE:\n{not json", "SUMMARY:\n" + "s" * (MAX_INPUT_CHARS * 10)):
        r = parse_writer_output(garbage)
        assert r.people == () and r.topics == () and r.errors


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.sampled_from(["", "MEMORIES:\n", "FACTS:\n[", "TOPICS:\n{", "PEOPLE:\n[{"]))
def test_never_raises(noise: str, prefix: str) -> None:
    r = parse_extraction(prefix + noise)
    w = parse_writer_output(prefix + noise)
    assert isinstance(r.errors, tuple) and isinstance(w.errors, tuple)
