"""The write audit: one JSON line per guarded write, so "when did this memory change, and who
changed it" has an answer. Lines are appended under ``flock`` and written with one ``write`` call,
so concurrent writers (threads or processes) never interleave inside a line."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path


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
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    finally:
        os.close(fd)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """``*`` and ``?`` match within one path component, ``**`` across components."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)
