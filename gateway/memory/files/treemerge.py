"""Merge one memory tree into another through guarded stores (user merges after ``/link``).

Both ends go through ``MemoryStore``: the source is walked and read without following a symlink at any
component (a symlinked file or directory planted in it is skipped, never read), and the destination is
written with containment, the per-file lock, atomic replace and an audit line (``source="merge:<id>"``).
Markdown and JSONL logs are appended; a file that cannot be appended (over the size cap, not a log, or
a symlink in the way) lands under the next free part name (``2026-05-09.2.md``, ``TASKS.2.json``), the
session log's own convention, so nothing is overwritten or lost. Dot-names (``.index/``, ``.locks/``,
``.audit.jsonl``, temp files) are the store's own, derived or rebuilt, and are not copied.

The source tree is removed only when every file arrived; otherwise the files that did not stay where
they are, and the error names them.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from gateway.memory.files.errors import FileTooLargeError, MemoryFileNotFoundError, MemoryStoreError
from gateway.memory.files.store import MemoryStore

log = logging.getLogger("kith.memory.merge")

APPENDABLE = (".md", ".jsonl")
_MAX_PARTS = 1000


@dataclass(slots=True)
class MergeReport:
    merged: list[str] = field(default_factory=list)  # source paths that arrived (appended or written)
    renamed: dict[str, str] = field(default_factory=dict)  # source path -> where it landed instead
    failed: dict[str, str] = field(default_factory=dict)  # source path -> why it stayed in the source
    removed_source: bool = False


def merge_tree(src_root: Path, dst_root: Path, *, max_file_bytes: int, label: str) -> MergeReport:
    """Merge the files below ``src_root`` into ``dst_root``; remove ``src_root`` if all arrived."""
    report = MergeReport()
    try:
        st = os.lstat(src_root)
    except FileNotFoundError:
        return report
    if not stat.S_ISDIR(st.st_mode):
        # A symlink (or a file) where the user's tree should be: never follow it, leave it to the operator.
        report.failed[""] = "the source tree is not a directory (a symlink?); left in place"
        log.error("merge %s: %s is not a directory; nothing merged from it", label, src_root)
        return report
    src = MemoryStore(src_root, max_file_bytes=max_file_bytes)
    if src.root != src_root.parent.resolve() / src_root.name:
        report.failed[""] = "the source tree moved while it was opened; left in place"
        return report
    dst = MemoryStore(dst_root, max_file_bytes=max_file_bytes)
    source = f"merge:{label}"
    for entry in src.files():  # regular files only; symlinks and dot-names are skipped, never followed
        rel = entry.path
        try:
            data = src.read_bytes(rel)
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            report.failed[rel] = "not UTF-8 text"
            continue
        except MemoryStoreError as exc:  # swapped for a symlink, a hard link, gone since the walk
            report.failed[rel] = str(exc)
            continue
        try:
            landed = _merge_file(dst, rel, text, source)
        except MemoryStoreError as exc:  # e.g. a symlinked directory in the destination
            report.failed[rel] = str(exc)
            continue
        report.merged.append(rel)
        if landed != rel:
            report.renamed[rel] = landed
    if report.failed:
        # Keep what did not arrive; drop what did, through the store (locks, audit, no symlink followed).
        for rel in report.merged:
            try:
                src.delete(rel, source=source)
            except MemoryStoreError:
                log.exception("merge %s: could not remove merged %s from the source", label, rel)
        log.error("merge %s: %d file(s) stayed in %s: %s", label, len(report.failed), src_root,
                  "; ".join(f"{k or '.'}: {v}" for k, v in report.failed.items()))
        return report
    report.removed_source = remove_tree(src_root)
    return report


def _merge_file(dst: MemoryStore, rel: str, text: str, source: str) -> str:
    """Put ``text`` into ``dst`` at ``rel`` (append to a log, else write); return where it landed."""
    head = rel.rpartition("/")[0]
    if head:
        try:
            dst.list(head)  # a symlinked directory on the way raises here, with the reason
        except MemoryFileNotFoundError:
            pass
    try:
        old: str | None = dst.read(rel)
    except MemoryFileNotFoundError:
        old = None
    except MemoryStoreError as exc:
        # A symlink, hard link or FIFO at the target: never write through it; keep ours beside it.
        log.warning("merge: %s in the destination is refused (%s); the merged copy goes beside it", rel, exc)
        return _write_parts(dst, _free_part(dst, rel), text, source)
    if old is None:
        return _write_parts(dst, rel, text, source)
    if rel.endswith(APPENDABLE):
        sep = "" if not old or old.endswith("\n") else "\n"
        try:
            dst.append(rel, sep + text, source=source)
            return rel
        except FileTooLargeError:
            pass  # continue in the next part, like the session log does past the cap
    return _write_parts(dst, _free_part(dst, rel), text, source)


def _write_parts(dst: MemoryStore, rel: str, text: str, source: str) -> str:
    """Write ``text`` at ``rel``; a text over the cap (a file edited by hand) continues in further parts."""
    chunks = _chunks(text, dst.max_file_bytes)
    dst.write(rel, chunks[0], source=source)
    for chunk in chunks[1:]:
        dst.write(_free_part(dst, rel), chunk, source=source)
    return rel


def _taken(dst: MemoryStore, rel: str) -> bool:
    try:
        dst.stat(rel)
    except MemoryFileNotFoundError:
        return False
    except MemoryStoreError:
        return True  # a symlink or another odd entry: not ours to replace
    return True


def _free_part(dst: MemoryStore, rel: str) -> str:
    head, _, name = rel.rpartition("/")
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    for n in range(2, _MAX_PARTS):
        candidate = f"{stem}.{n}" + (f".{suffix}" if suffix else "")
        candidate = f"{head}/{candidate}" if head else candidate
        if not _taken(dst, candidate):
            return candidate
    raise MemoryStoreError(f"{rel}: no free part name left in the destination")


def _chunks(text: str, cap: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``cap`` UTF-8 bytes, at line ends where possible."""
    if len(text.encode("utf-8")) <= cap:
        return [text]
    out: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        n = len(line.encode("utf-8"))
        if size + n > cap and current:
            out.append("".join(current))
            current, size = [], 0
        while n > cap:  # one line longer than a whole file: cut it on a character boundary
            piece = line.encode("utf-8")[:cap].decode("utf-8", errors="ignore")
            out.append(piece)
            line = line[len(piece):]
            n = len(line.encode("utf-8"))
        current.append(line)
        size += n
    if current:
        out.append("".join(current))
    return out


def remove_tree(root: Path) -> bool:
    """Delete ``root`` without following any symlink inside it (or at it)."""
    if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - kith runs on Linux
        log.error("this platform's rmtree may follow symlinks; %s is left for the operator", root)
        return False
    try:
        shutil.rmtree(root)  # fd-based on Linux: a symlink is unlinked, never descended into
    except FileNotFoundError:
        return True
    except OSError as exc:  # e.g. the root itself was swapped for a symlink
        log.error("could not remove %s after the merge: %s", root, exc)
        return False
    return True
