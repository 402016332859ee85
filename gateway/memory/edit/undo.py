"""Undo records of forgets: what one forget removed, so ``/forget undo`` can put it back.

One JSON file per forget in ``<root>/.forgotten/<id>.json``, next to the store's audit and locks:
a dot-name, so no store API (``memory_get``, the indexer, ``grep``) ever lists or reads it and what
was forgotten never reaches recall or a prompt through it. It holds each changed file's text before
the forget (restored byte for byte when the file has not changed since) and the removed lines with
their positions (put back into a file edited since, ``restore_text``), the deleted facts and the old
transcript rows. Records older than ``KEEP_DAYS`` are deleted: forgetting is meant to end in forgotten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from gateway.memory.files import guarded_fs

DIR = ".forgotten"
KEEP_DAYS = 7


def _dir_fd(root: Path, *, create: bool) -> contextlib.AbstractContextManager[int | None]:
    return guarded_fs.private_dir(root, DIR, create=create)


def save(root: Path, record: dict[str, Any]) -> None:
    data = json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8")
    name = f"{record['id']}.json"
    with _dir_fd(root, create=True) as fd:
        assert fd is not None
        guarded_fs.atomic_replace(fd, name, data, f"{DIR}/{name}")


def _names(fd: int) -> list[str]:
    return sorted(n for n in os.listdir(fd) if n.endswith(".json") and not n.startswith("."))


def load(root: Path, forget_id: str | None = None) -> dict[str, Any] | None:
    """The record ``forget_id``, or the newest one (ids sort by time) when None."""
    with _dir_fd(root, create=False) as fd:
        if fd is None:
            return None
        names = _names(fd)
        if forget_id is not None:
            names = [n for n in names if n == f"{forget_id}.json"]
        for name in reversed(names):
            try:
                raw = guarded_fs.read_file(fd, (name,), f"{DIR}/{name}")
                record = json.loads(raw)
            except (OSError, ValueError):
                continue
            if isinstance(record, dict):
                return record
    return None


def drop(root: Path, forget_id: str) -> None:
    with _dir_fd(root, create=False) as fd:
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{forget_id}.json", dir_fd=fd)


def expire(root: Path, now: float | None = None) -> int:
    """Delete records older than ``KEEP_DAYS``; returns how many."""
    cutoff = (now if now is not None else time.time()) - KEEP_DAYS * 86400
    gone = 0
    with _dir_fd(root, create=False) as fd:
        if fd is None:
            return 0
        for name in _names(fd):
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if st.st_mtime < cutoff:
                os.unlink(name, dir_fd=fd)
                gone += 1
    return gone


def restore_text(current: str | None, entry: dict[str, Any]) -> str:
    """The file with the removed lines back: the exact old text when nothing changed since, else the
    lines put back where they were (a placeholder in a session log is replaced in place)."""
    if current is not None and hashlib.sha256(current.encode("utf-8")).hexdigest() == entry.get("after_sha256"):
        return str(entry["before"])
    rows = (current or "").splitlines(keepends=True)
    if rows and not rows[-1].endswith(("\n", "\r")):
        rows[-1] += "\n"
    for item in sorted(entry.get("removed", []), key=lambda r: int(r["line"])):
        idx = int(item["line"]) - 1
        text = str(item["text"]) + "\n"
        instead = str(item.get("replaced_with") or "")
        if instead:
            near = [i for i, r in enumerate(rows) if r.rstrip("\r\n") == instead]
            if near:
                best = min(near, key=lambda i: abs(i - idx))
                rows[best] = text
                continue
        rows.insert(min(max(idx, 0), len(rows)), text)
    return "".join(rows)
