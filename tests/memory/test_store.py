"""MemoryStore: containment, symlinks, size caps, audit, typed errors (acceptance 1)."""

from __future__ import annotations

import json
import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.memory.files.store import (
    FileTooLargeError,
    MemoryFileNotFoundError,
    MemoryStore,
    MemoryStoreError,
    NotAFileError,
    PathEscapeError,
    ReservedPathError,
)

SECRET = "outside-secret-7f3a"


@pytest.fixture
def world(tmp_path: Path) -> tuple[MemoryStore, Path, list[str]]:
    """A store whose root holds symlinks to a sibling directory, a file, and nowhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok").mkdir()
    (root / "ok" / "note.md").write_text("inside\n")
    os.symlink(outside, root / "dirlink")
    os.symlink(outside / "secret.md", root / "filelink.md")
    os.symlink(tmp_path / "nowhere", root / "dangling.md")
    os.symlink(outside, root / "ok" / "nested")
    seen: list[str] = []
    return MemoryStore(root, max_file_bytes=4096, on_write=seen.append), outside, seen


def _outside_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]
    assert (outside / "secret.md").read_text() == SECRET


_segments = st.sampled_from(
    [
        "..",
        ".",
        "",
        "ok",
        "dirlink",
        "filelink.md",
        "dangling.md",
        "nested",
        "secret.md",
        "x.md",
        "/",
        "\\",
        "\x00",
        ".index",
        "~",
        "..%2f",
        "C:",
        "\udc80",
    ]
)
_traversal = st.one_of(
    st.lists(_segments, min_size=1, max_size=6).map("/".join),
    st.lists(_segments, min_size=1, max_size=6).map("".join),
    st.text(alphabet=string.printable + "\x00/.", max_size=40),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rel=_traversal, text=st.text(max_size=64))
def test_nothing_escapes_the_root(world: tuple[MemoryStore, Path, list[str]], rel: str, text: str) -> None:
    store, outside, _ = world
    for op in (
        lambda: store.read(rel),
        lambda: store.write(rel, text, source="fuzz"),
        lambda: store.append(rel, text, source="fuzz"),
        lambda: store.delete(rel, source="fuzz"),
        lambda: store.exists(rel),
        lambda: store.list(rel),
        lambda: store.grep("secret", rel),
    ):
        try:
            result = op()
        except MemoryStoreError:
            continue  # typed refusal
        assert SECRET not in repr(result)
    _outside_untouched(outside)
    # The planted links are intact, and every other file is a real file inside the root.
    assert os.readlink(store.root / "filelink.md") == str(outside / "secret.md")
    for path, _dirs, files in os.walk(store.root):
        for name in files:
            if not Path(path, name).is_symlink():
                assert Path(path, name).resolve().is_relative_to(store.root)


@pytest.mark.parametrize("rel", ["dirlink/secret.md", "ok/nested/secret.md", "filelink.md", "dangling.md"])
def test_symlinks_are_refused_with_a_clear_error(world: tuple[MemoryStore, Path, list[str]], rel: str) -> None:
    store, outside, seen = world
    for op in (
        lambda: store.read(rel),
        lambda: store.write(rel, "pwned", source="t"),
        lambda: store.append(rel, "pwned", source="t"),
        lambda: store.delete(rel, source="t"),
    ):
        with pytest.raises(PathEscapeError, match="symlink"):
            op()
    _outside_untouched(outside)
    assert not (outside.parent / "nowhere").exists()
    assert seen == []


def test_listing_and_search_skip_symlinks(world: tuple[MemoryStore, Path, list[str]]) -> None:
    store, _, _ = world
    assert [e.path for e in store.list()] == ["ok"]
    assert [e.path for e in store.files()] == ["ok/note.md"]
    assert store.grep("secret|inside") and all(h.path == "ok/note.md" for h in store.grep("secret|inside"))


@pytest.mark.parametrize(
    ("rel", "error"),
    [
        ("../x.md", PathEscapeError),
        ("/etc/passwd", PathEscapeError),
        ("a\x00b", PathEscapeError),
        ("a\\..\\b", PathEscapeError),
        (".index/db", ReservedPathError),
        (".audit.jsonl", ReservedPathError),
        ("", PathEscapeError),
        ("ok", NotAFileError),
        ("missing.md", MemoryFileNotFoundError),
    ],
)
def test_typed_errors(world: tuple[MemoryStore, Path, list[str]], rel: str, error: type[Exception]) -> None:
    store, _, _ = world
    with pytest.raises(error) as info:
        store.read(rel)
    assert str(info.value)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(min_value=0, max_value=10_000))
def test_size_cap(world: tuple[MemoryStore, Path, list[str]], size: int) -> None:
    store, _, _ = world
    store.write("cap.md", "seed", source="t")
    if size > store.max_file_bytes:
        with pytest.raises(FileTooLargeError) as info:
            store.write("cap.md", "x" * size, source="t")
        assert info.value.limit == 4096 and info.value.size == size
        assert store.read("cap.md") == "seed"  # refused writes change nothing
    else:
        store.write("cap.md", "x" * size, source="t")
        assert len(store.read("cap.md")) == size


def test_append_respects_the_cap(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, max_file_bytes=1024)
    store.append("log.md", "a" * 1000, source="t")
    with pytest.raises(FileTooLargeError):
        store.append("log.md", "b" * 100, source="t")
    assert store.read("log.md") == "a" * 1000


def test_audit_gitignore_and_on_write(tmp_path: Path) -> None:
    seen: list[str] = []
    store = MemoryStore(tmp_path / "u", on_write=seen.append)
    store.write("USER.md", "# Ann\n", source="curation", message_id="m1", trust="model")
    store.append("sessions/2024-05-01.md", "hi\n", source="turn", message_id="m2", trust="user")
    store.move("USER.md", "people/ann.md", source="cli")
    store.delete("people/ann.md", source="cli")
    lines = [json.loads(x) for x in (store.root / ".audit.jsonl").read_text().splitlines()]
    assert [(r["op"], r["file"]) for r in lines] == [
        ("write", "USER.md"),
        ("append", "sessions/2024-05-01.md"),
        ("write", "people/ann.md"),
        ("delete", "USER.md"),
        ("delete", "people/ann.md"),
    ]
    assert lines[0] | {"ts": None} == {
        "ts": None,
        "op": "write",
        "file": "USER.md",
        "bytes": 6,
        "size": 6,
        "source": "curation",
        "message_id": "m1",
        "trust": "model",
        "sha256": lines[0]["sha256"],
    }
    assert seen == ["USER.md", "sessions/2024-05-01.md", "people/ann.md", "USER.md", "people/ann.md"]
    assert ".index/" in (store.root / ".gitignore").read_text().splitlines()
    assert store.files() == [] or [e.path for e in store.files()] == ["sessions/2024-05-01.md"]


def test_on_write_failure_does_not_fail_the_write(tmp_path: Path) -> None:
    def boom(rel: str) -> None:
        raise RuntimeError("index down")

    store = MemoryStore(tmp_path, on_write=boom)
    store.write("a.md", "x", source="t")
    assert store.read("a.md") == "x"


def test_fifo_does_not_hang_a_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    store = MemoryStore(tmp_path)
    with pytest.raises(NotAFileError):
        store.read("pipe.md")
    with pytest.raises(NotAFileError):
        store.write("pipe.md", "x", source="t")
