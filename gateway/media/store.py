"""Attachments in the person's own tree: ``users/<id>/media/YYYY/MM/<id>-<safe name>``.

The file itself goes through the same guarded rails as every memory write (``guarded_fs``: contained
in the root, no symlink followed, atomic replace, an audit line); the text read from a document goes
next to it as ``<file>.md`` through the person's ``MemoryStore``, so it is indexed for memory search
with its source. ``Saved.undo`` removes what was written, so a message that fails halfway leaves nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime

from gateway.memory.files import guarded_fs
from gateway.memory.files.audit import append_audit, audit_record
from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.store import MemoryStore

MEDIA_DIR = "media"
SOURCE = "media"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, fallback: str = "file") -> str:
    """A file name that is one path segment of ASCII letters, digits, ``._-``, at most 80 long."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    cleaned = _UNSAFE.sub("-", ascii_name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).strip(".-")
    if not cleaned:
        return fallback
    stem, dot, ext = cleaned.rpartition(".")
    if dot and len(ext) <= 10:
        return f"{stem[: 80 - len(ext) - 1]}.{ext}"
    return cleaned[:80]


@dataclass(slots=True)
class Saved:
    """What one message stored, so it can be taken back as a whole."""

    store: MemoryStore
    files: list[str] = field(default_factory=list)  # binary files, written through guarded_fs
    texts: list[str] = field(default_factory=list)  # extracted text, written through the store

    def undo(self, message_id: str = "") -> None:
        for rel in self.texts:
            with contextlib.suppress(MemoryStoreError, OSError):
                self.store.delete(rel, source=SOURCE, message_id=message_id)
        for rel in self.files:
            with contextlib.suppress(MemoryStoreError, OSError):
                _unlink(self.store, rel, message_id)
        self.files.clear()
        self.texts.clear()


def media_path(name: str, at: datetime, extension: str = "") -> str:
    """``media/YYYY/MM/<random id>-<safe name>``; the id keeps two files of one name apart."""
    safe = safe_name(name)
    if extension and not safe.lower().endswith(extension):
        safe = f"{safe}{extension}"
    return f"{MEDIA_DIR}/{at:%Y}/{at:%m}/{secrets.token_hex(6)}-{safe}"


def save_file(saved: Saved, rel: str, data: bytes, *, message_id: str = "") -> None:
    store = saved.store
    parts = guarded_fs.split_rel(rel)
    fd = os.open(store.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with guarded_fs.parent_dir(fd, parts, rel, create=True) as dfd:
            if guarded_fs.lstat_target(dfd, parts[-1]) is not None:
                raise MemoryStoreError(f"{rel} already exists")
            guarded_fs.atomic_replace(dfd, parts[-1], data, rel)
    finally:
        os.close(fd)
    saved.files.append(rel)
    append_audit(store.audit_path, audit_record(op="write", rel=rel, data=data, source=SOURCE,
                                                message_id=message_id, trust="user"))  # fmt: skip


def save_text(saved: Saved, rel: str, text: str, *, message_id: str = "") -> None:
    saved.store.write(rel, text, source=SOURCE, message_id=message_id, trust="user")
    saved.texts.append(rel)


def _unlink(store: MemoryStore, rel: str, message_id: str) -> None:
    parts = guarded_fs.split_rel(rel)
    fd = os.open(store.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with guarded_fs.parent_dir(fd, parts, rel) as dfd:
            guarded_fs.check_replaceable(dfd, parts[-1], rel)
            os.unlink(parts[-1], dir_fd=dfd)
    finally:
        os.close(fd)
    append_audit(store.audit_path, audit_record(op="delete", rel=rel, data=b"", source=SOURCE,
                                                message_id=message_id, trust="system"))  # fmt: skip
