"""Seed 001's MemoryStore API: ``glob()`` with read's containment rules, and the per-directory file cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.memory.files.errors import DirectoryFullError, PathEscapeError, ReservedPathError
from gateway.memory.files.store import MemoryStore


def test_glob_matches_within_the_root_and_never_outside(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "root")
    for rel in ("USER.md", "people/discord-1.md", "people/twitch-2.md", "people/_aliases.json",
                "topics/elden-ring.md", "lore/imported/citadel.md", "notes.md"):
        store.write(rel, "x\n", source="test")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("no")
    os.symlink(tmp_path / "outside", store.root / "linked")  # a symlink out is never followed
    os.symlink(tmp_path / "outside" / "secret.md", store.root / "people" / "evil.md")
    assert store.glob("people/*.md") == ["people/discord-1.md", "people/twitch-2.md"]
    assert store.glob("**/*.md") == ["USER.md", "lore/imported/citadel.md", "notes.md", "people/discord-1.md",
                                     "people/twitch-2.md", "topics/elden-ring.md"]
    assert store.glob("lore/**") == ["lore/imported/citadel.md"]
    assert store.glob("people/[dt]*-?.md") == ["people/discord-1.md", "people/twitch-2.md"]
    assert store.glob("people/[!d]*.md") == ["people/twitch-2.md"]
    assert store.glob("USER.md") == ["USER.md"] and store.glob("nothing/*") == []
    assert ".audit.jsonl" in os.listdir(store.root) and not any(".audit" in p for p in store.glob("**"))
    for bad, error in (("../*", PathEscapeError), ("/etc/*", PathEscapeError), ("people/../../*", PathEscapeError),
                       ("**/.audit*", ReservedPathError), (".index/*", ReservedPathError)):
        with pytest.raises(error):
            store.glob(bad)
    capped = MemoryStore(tmp_path / "root", max_results=2)
    assert len(capped.glob("**")) == 2


def test_a_full_directory_refuses_new_files_with_a_clear_error(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "root", max_dir_files=3)
    for i in range(3):
        store.write(f"topics/t{i}.md", "x\n", source="test")
    with pytest.raises(DirectoryFullError) as err:
        store.write("topics/t3.md", "x\n", source="test")
    assert "topics already holds 3 files (limit 3, memory.max_dir_files)" in str(err.value)
    with pytest.raises(DirectoryFullError):
        store.append("topics/t4.md", "x\n", source="test")
    store.write("topics/t0.md", "rewritten\n", source="test")  # an existing file can still change
    store.append("topics/t1.md", "more\n", source="test")
    store.write("people/p.md", "x\n", source="test")  # another directory has room
    store.delete("topics/t2.md", source="test")
    store.write("topics/t3.md", "x\n", source="test")  # room again
    assert not store.exists("topics/t4.md")
