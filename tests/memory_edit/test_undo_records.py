"""Undo records of forgets (``.forgotten/``): stored out of every store API's reach, newest first,
expired after ``KEEP_DAYS``, never written through a planted symlink; ``restore_text`` puts lines back."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from gateway.memory.edit import undo
from gateway.memory.files.errors import PathEscapeError
from gateway.memory.files.store import MemoryStore


def test_records_are_hidden_from_the_store_and_expire(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "u")
    store.write("a.md", "x\n", source="test")
    undo.save(store.root, {"id": "20260101T000000000000-aaaaaa", "query": "old"})
    undo.save(store.root, {"id": "20260102T000000000000-bbbbbb", "query": "new"})
    assert [e.path for e in store.files()] == ["a.md"], "no store API lists the records"
    assert (undo.load(store.root) or {})["query"] == "new"
    assert (undo.load(store.root, "20260101T000000000000-aaaaaa") or {})["query"] == "old"
    old = store.root / undo.DIR / "20260101T000000000000-aaaaaa.json"
    past = time.time() - (undo.KEEP_DAYS + 1) * 86400
    os.utime(old, (past, past))
    assert undo.expire(store.root) == 1 and not old.exists()
    undo.drop(store.root, "20260102T000000000000-bbbbbb")
    assert undo.load(store.root) is None


def test_a_planted_symlink_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "u"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / undo.DIR).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PathEscapeError):
        undo.save(root, {"id": "x", "query": "q"})
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_restore_text_exact_or_by_position() -> None:
    before = "a\nb secret\nc\r\n"
    after = "a\nc\r\n"
    entry = {"before": before, "after_sha256": hashlib.sha256(after.encode()).hexdigest(),
             "removed": [{"line": 2, "text": "b secret", "replaced_with": ""}]}
    assert undo.restore_text(after, entry) == before  # byte for byte, CRLF and all
    assert undo.restore_text("z\na\nc\n", entry) == "z\nb secret\na\nc\n"  # edited since: by position
    assert undo.restore_text(None, entry) == "b secret\n"  # deleted since
    log = {"before": "", "after_sha256": "", "removed": [{"line": 3, "text": "> secret", "replaced_with":
                                                          "> [forgotten]"}]}
    assert undo.restore_text("h\n\n> [forgotten]\nx\n", log) == "h\n\n> secret\nx\n"
