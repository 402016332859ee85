"""Hygiene proposals: what the weekly job suggests, kept until the person accepts or rejects it.

One JSON file per memory root, ``<root>/.hygiene/proposals.json``: a dot-name, so no store API, tool,
index or recall ever reads it (a proposal quotes lines of the person's files), and ``kith users
delete`` removes it with the tree. Each proposal carries the exact changes it would make: for every
file the SHA-256 it had when the proposal was made and the complete new text (or ``None``: delete).
Accepting applies exactly that (``apply.py``), and refuses when any file changed in between.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from gateway.memory.files import guarded_fs
from gateway.memory.files.errors import MemoryFileNotFoundError

DIR = ".hygiene"
FILE = "proposals.json"
LOCK = "proposals.lock"
Kind = Literal["merge", "conflict", "stale", "promote", "playbook"]
Status = Literal["pending", "accepted", "rejected", "failed"]
KINDS: tuple[str, ...] = ("merge", "conflict", "stale", "promote", "playbook")
KEEP_DECIDED = 50  # decided proposals kept (newest), so a rejected one is not proposed again


@dataclass(slots=True)
class Change:
    path: str
    before_sha256: str  # "" = the file does not exist yet
    after: str | None  # the complete new text; None = delete the file


@dataclass(slots=True)
class Proposal:
    id: str
    kind: str
    title: str
    detail: str
    changes: list[Change]
    fingerprint: str  # what it is about: the same finding is never proposed twice
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    status: str = "pending"
    decided: str = ""
    actor: str = ""
    reason: str = ""  # why it failed to apply

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.changes]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Proposal:
        changes = [Change(path=str(c["path"]), before_sha256=str(c.get("before_sha256", "")),
                          after=c.get("after") if isinstance(c.get("after"), str) else None)
                   for c in data.get("changes", []) if isinstance(c, dict) and "path" in c]  # fmt: skip
        return Proposal(id=str(data["id"]), kind=str(data.get("kind", "")), title=str(data.get("title", "")),
                        detail=str(data.get("detail", "")), changes=changes,
                        fingerprint=str(data.get("fingerprint", "")), created=str(data.get("created", "")),
                        status=str(data.get("status", "pending")), decided=str(data.get("decided", "")),
                        actor=str(data.get("actor", "")), reason=str(data.get("reason", "")))  # fmt: skip


def new_id() -> str:
    return "h" + datetime.now(UTC).strftime("%y%m%d") + secrets.token_hex(3)


def _dir(root: Path, *, create: bool) -> contextlib.AbstractContextManager[int | None]:
    return guarded_fs.private_dir(root, DIR, create=create)


def _read(fd: int) -> list[Proposal]:
    try:
        raw = guarded_fs.read_file(fd, (FILE,), f"{DIR}/{FILE}")
    except (MemoryFileNotFoundError, FileNotFoundError):
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    items = data.get("proposals", []) if isinstance(data, dict) else []
    out = []
    for item in items:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            out.append(Proposal.from_json(item))
    return out


def load(root: Path) -> list[Proposal]:
    """Every stored proposal, oldest first (pending and recently decided)."""
    if not root.is_dir():
        return []
    with _dir(root, create=False) as fd:
        return [] if fd is None else _read(fd)


@contextlib.contextmanager
def editing(root: Path) -> Iterator[list[Proposal]]:
    """The proposals under an exclusive lock (threads and processes); saved when the block ends."""
    with _dir(root, create=True) as fd:
        assert fd is not None
        lock_fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            items = _read(fd)
            yield items
            pending = [p for p in items if p.status == "pending"]
            decided = [p for p in items if p.status != "pending"][-KEEP_DECIDED:]
            kept = sorted(pending + decided, key=lambda p: p.created)
            data = json.dumps({"proposals": [p.to_json() for p in kept]}, ensure_ascii=False, indent=1)
            guarded_fs.atomic_replace(fd, FILE, data.encode("utf-8"), f"{DIR}/{FILE}")
        finally:
            os.close(lock_fd)


def pending(root: Path) -> list[Proposal]:
    return [p for p in load(root) if p.status == "pending"]
