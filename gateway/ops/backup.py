"""``kith backup DEST``: one tar file holding a consistent snapshot of an install, taken while the
daemon runs (docs/operations.md#backup).

What goes in, in this order:

1. **State**: every table through ``gateway/state/transfer.py`` (``dump_tables``), read as of one
   instant by the backend (SQLite: one read transaction beside the daemon's writes; PostgreSQL: one
   snapshot), as JSON lines, with ``table_checksums`` of that same content in the manifest.
2. **Files**: the Markdown memory of every person and shared room, personas, media, audit logs:
   everything under the data dir except what is derived or private to one process (the index, the
   embedded Redis, the SQLite files themselves, locks, temp files, the operator token). Each file is
   copied, then verified: the open file must still be the one at its path, unchanged, after the read
   (writers replace files atomically, so a read is always a whole version; one replaced during the
   read is read again).

State first, files second: every turn in the state snapshot is either in the Markdown session logs
already or after the log watermark stored with it, so the first start after a restore appends it
(the daemon's reconciliation). Files may hold a few turns more than the transcript, never fewer.

Not included, on purpose: the vector index (rebuilt from the Markdown on restore; it is a cache and
copying memory-mapped files under a writer is not consistent), the job bus (queued jobs are derived:
indexing re-syncs by content hash, schedules re-arm at start), ``operator.token`` (a credential of
this machine; a restored daemon makes a new one) and the config file (holds secrets; back it up
with your secrets manager).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

FORMAT = 1
MANIFEST = "manifest.json"
STATE_DIR = "state"
FILES_DIR = "files"
# Top-level entries of the data dir that are derived, per process, or a local credential.
EXCLUDED_TOP = frozenset({"qdrant", "redis", "state.sqlite", "state.sqlite-wal", "state.sqlite-shm",
                          "state.sqlite-journal", "daemon.lock", "disk.reserve", "operator.token", "nodes"})
EXCLUDED_DIRS = frozenset({".locks", ".index"})  # per memory root: flock files, derived caches
COPY_TRIES = 5


class BackupError(RuntimeError):
    """The backup could not be written (the message says what and where); nothing is left at DEST."""


@dataclass(slots=True)
class Report:
    path: Path
    tables: dict[str, tuple[int, str]] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    retried: int = 0  # files replaced while being read, read again
    seconds: float = 0.0


def excluded(rel: Path) -> bool:
    parts = rel.parts
    if not parts or parts[0] in EXCLUDED_TOP:
        return True
    name = parts[-1]
    return any(p in EXCLUDED_DIRS for p in parts[:-1]) or (name.startswith(".") and ".tmp-" in name) \
        or name.endswith(".sock")


def walk(data_dir: Path) -> Iterator[Path]:
    """Regular files to back up, relative to ``data_dir``, in a stable order; symlinks are skipped
    (the guarded store never writes through one, and a link out of the tree is not ours to copy)."""
    for dirpath, dirnames, filenames in os.walk(data_dir):
        here = Path(dirpath).relative_to(data_dir)
        dirnames[:] = sorted(d for d in dirnames if not excluded(here / d) and d not in EXCLUDED_DIRS
                             and not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            rel = here / name
            if not excluded(rel):
                yield rel


def read_verified(path: Path) -> tuple[bytes, os.stat_result, int] | None:
    """The whole content of ``path`` as one version, its stat and how many re-reads it took; None when
    the file disappeared or is no longer a regular file."""
    for attempt in range(COPY_TRIES):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, OSError):
            return None
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                return None
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            after = os.fstat(fd)
        finally:
            os.close(fd)
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return None  # deleted after the read: it was a whole version, but it is gone now
        same_file = (now.st_ino, now.st_dev) == (before.st_ino, before.st_dev)
        version = (before.st_size, before.st_mtime_ns)
        unchanged = len(data) == before.st_size and (after.st_size, after.st_mtime_ns) == version == (
            now.st_size, now.st_mtime_ns)
        if same_file and unchanged:
            return data, before, attempt
    return data, before, COPY_TRIES  # changing on every read (an append-only log): the last whole read


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, *, mode: int = 0o600, mtime: float | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(mtime if mtime is not None else time.time())
    tar.addfile(info, io.BytesIO(data))


def write_backup(state: Any, data_dir: Path, dest: Path, *, kith_version: str = "",
                 state_kind: str = "sqlite") -> Report:
    """Write the backup of ``state`` and ``data_dir`` to ``dest`` (``.tar``, ``.tar.gz`` or ``.tgz``),
    atomically: a partial file is removed on failure, so DEST exists only complete."""
    from gateway.state.transfer import dump_tables

    started = time.monotonic()
    dest = Path(dest)
    if dest.exists():
        raise BackupError(f"{dest} exists; choose a new file name")
    compress = dest.name.endswith((".tar.gz", ".tgz"))
    report = Report(dest)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    files: dict[str, dict[str, Any]] = {}
    try:
        with tarfile.open(tmp, "w:gz" if compress else "w", format=tarfile.PAX_FORMAT) as tar:
            # 1. State: one snapshot for the rows, and the checksums of the same content.
            with contextlib.ExitStack() as stack:
                spool: dict[str, IO[bytes]] = {}
                for table, rows in dump_tables(state):
                    out = spool.get(table)
                    if out is None:
                        out = spool[table] = stack.enter_context(tempfile.SpooledTemporaryFile(8 * 1024 * 1024))
                    for row in rows:
                        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
                tables = _checksums_of(spool, state.tables.names())
                for table, out in sorted(spool.items()):
                    size = out.tell()
                    out.seek(0)
                    info = tarfile.TarInfo(f"{STATE_DIR}/{table}.jsonl")
                    info.size, info.mode, info.mtime = size, 0o600, int(time.time())
                    tar.addfile(info, out)
            report.tables = tables
            # 2. Files, each copied then verified.
            for rel in walk(data_dir):
                got = read_verified(data_dir / rel)
                if got is None:
                    continue
                data, st, retries = got
                report.retried += min(retries, 1)
                name = rel.as_posix()
                _add_bytes(tar, f"{FILES_DIR}/{name}", data, mode=stat.S_IMODE(st.st_mode), mtime=st.st_mtime)
                files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
                report.files += 1
                report.bytes += len(data)
            manifest = {
                "format": FORMAT, "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "kith_version": kith_version, "state_backend": state_kind,
                "tables": {t: {"rows": n, "sha256": h} for t, (n, h) in sorted(tables.items())},
                "files": files,
                "excluded": sorted(EXCLUDED_TOP), "index": "rebuilt from the Markdown on restore",
            }
            _add_bytes(tar, MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False).encode())
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)  # everything a person told their assistant
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    report.seconds = time.monotonic() - started
    return report


def _checksums_of(spool: dict[str, IO[bytes]], names: list[str]) -> dict[str, tuple[int, str]]:
    """Per table (empty ones too), the checksum ``transfer.table_checksums`` would give for exactly the
    rows written: its own read would be another snapshot, which the daemon may have moved past."""
    from gateway.state.transfer import canonical

    out: dict[str, tuple[int, str]] = {t: (0, hashlib.sha256().hexdigest()) for t in names}
    for table, f in spool.items():
        f.seek(0)
        digest, n = hashlib.sha256(), 0
        for line in f:
            digest.update(canonical(json.loads(line)))
            n += 1
        out[table] = (n, digest.hexdigest())
        f.seek(0, io.SEEK_END)
    return out
