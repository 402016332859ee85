"""gateway/util/jsonl.py: what a reader of an append-only JSON-lines log keeps and what it skips."""

from __future__ import annotations

from gateway.util.jsonl import json_objects


def test_whole_objects_are_kept_in_order_and_every_other_line_is_skipped() -> None:
    text = '{"a": 1}\n\nnot json\n[1, 2]\n"a string"\n{"b": 2}\n{"torn": '
    assert list(json_objects(text)) == [{"a": 1}, {"b": 2}]


def test_an_empty_log_has_no_objects() -> None:
    assert list(json_objects("")) == []
