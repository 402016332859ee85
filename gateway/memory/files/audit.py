"""The write audit: one JSON line per guarded write, so "when did this memory change, and who
changed it" has an answer. Lines are appended under ``flock`` and written with one ``write`` call,
so concurrent writers (threads or processes) never interleave inside a line."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from gateway.memory.files.errors import PathEscapeError


def audit_record(
    *, op: str, rel: str, data: bytes, source: str, message_id: str, trust: str, added: int | None = None
) -> dict[str, object]:
    return {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "op": op,
        "file": rel,
        "bytes": len(data) if added is None else added,  # bytes this operation wrote
        "size": len(data),  # file size afterwards
        "sha256": hashlib.sha256(data).hexdigest() if op != "delete" else "",
        "source": source,
        "message_id": message_id,
        "trust": trust,
    }


def append_audit(path: Path, record: dict[str, object]) -> None:
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    # O_NOFOLLOW: a symlink planted as the audit log would make every guarded write append a line
    # to whatever file it points at, outside the memory tree.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathEscapeError(path.name, "the audit log is a symlink; refusing to write through it") from None
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    finally:
        os.close(fd)

