"""``kith restore SRC --data-dir NEW``: a backup (``gateway/ops/backup.py``) into a new data directory.

Steps, each checked before the next: the manifest is read and its format known; NEW is empty or
absent; every file is extracted (tar's ``data`` filter: no absolute paths, no ``..``, no links out, no
devices) and its SHA-256 compared with the manifest; the tables are loaded into a fresh state (SQLite
``NEW/state.sqlite``, or the empty PostgreSQL database of ``--state-url``) through
``transfer.load_tables``, and ``table_checksums`` of the result must equal the manifest's. Then the
memory index is rebuilt from the restored Markdown (unless ``--no-index``: the daemon's first start
re-syncs it by content hash, which takes as long but happens while it serves).
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gateway.ops.backup import FILES_DIR, FORMAT, MANIFEST, STATE_DIR

BATCH = 2000


class RestoreError(RuntimeError):
    """The backup cannot be restored as asked; the message says why. What was written stays for
    inspection (NEW was empty, so nothing else is touched)."""


@dataclass(slots=True)
class Report:
    data_dir: Path
    tables: dict[str, int] = field(default_factory=dict)
    files: int = 0
    index: dict[str, int] = field(default_factory=dict)  # scope -> chunks embedded
    seconds: float = 0.0


def read_manifest(tar: tarfile.TarFile) -> dict[str, Any]:
    try:
        member = tar.getmember(MANIFEST)
    except KeyError:
        raise RestoreError("not a kith backup: no manifest.json") from None
    f = tar.extractfile(member)
    if f is None:
        raise RestoreError("not a kith backup: manifest.json is not a file")
    manifest = json.loads(f.read())
    if manifest.get("format") != FORMAT:
        raise RestoreError(f"backup format {manifest.get('format')!r}; this kith reads format {FORMAT}")
    return manifest  # type: ignore[no-any-return]


def check_empty(data_dir: Path) -> None:
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise RestoreError(f"{data_dir} exists and is not empty: restore into a new directory")


def extract_files(tar: tarfile.TarFile, manifest: dict[str, Any], data_dir: Path) -> int:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(data_dir, 0o700)
    expected: dict[str, dict[str, Any]] = manifest["files"]
    seen = 0
    prefix = FILES_DIR + "/"
    for member in tar:
        if not member.name.startswith(prefix):
            continue
        rel = member.name[len(prefix):]
        want = expected.get(rel)
        if want is None:
            raise RestoreError(f"{rel} is in the archive but not in its manifest")
        member.name = rel
        tar.extract(member, data_dir, filter="data")
        target = data_dir / rel
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        if digest != want["sha256"]:
            raise RestoreError(f"{rel}: content differs from the manifest (damaged backup)")
        seen += 1
    if seen != len(expected):
        raise RestoreError(f"the archive holds {seen} of the {len(expected)} files its manifest lists")
    for path in sorted(data_dir.rglob("*"), reverse=True):  # private: as the daemon creates them
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o700)
    return seen


def table_batches(tar: tarfile.TarFile) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for member in tar.getmembers():
        if not (member.name.startswith(STATE_DIR + "/") and member.name.endswith(".jsonl")):
            continue
        table = member.name[len(STATE_DIR) + 1 : -len(".jsonl")]
        f: IO[bytes] | None = tar.extractfile(member)
        if f is None:
            continue
        batch: list[dict[str, Any]] = []
        for line in f:
            batch.append(json.loads(line))
            if len(batch) >= BATCH:
                yield table, batch
                batch = []
        if batch:
            yield table, batch


def load_state(tar: tarfile.TarFile, manifest: dict[str, Any], state: Any) -> dict[str, int]:
    from gateway.state.transfer import load_tables, table_checksums

    present = table_checksums(state)
    busy = [t for t, (n, _) in present.items() if n]
    if busy:
        raise RestoreError(f"the target state is not empty (tables {', '.join(busy[:5])} hold rows)")
    counts = load_tables(state, table_batches(tar))
    got = table_checksums(state)
    wrong = [t for t, want in manifest["tables"].items()
             if got.get(t, (0, hashlib.sha256().hexdigest())) != (want["rows"], want["sha256"])]
    if wrong:
        raise RestoreError(f"restored tables differ from the backup: {', '.join(sorted(wrong))}")
    return counts


async def rebuild_index(config: Any) -> dict[str, int]:
    """The memory index of the restored tree, built from its Markdown (the same code ``kith memory
    reindex`` runs)."""
    from gateway.memory.search.service import MemoryService
    from gateway.plugins import indexes_live

    svc = MemoryService(config, live_indexing=indexes_live(config.plugins))
    await svc.start()
    try:
        reports = await svc.indexing.reindex()
    finally:
        await svc.close()
    return {scope: r.embedded for scope, r in reports.items()}


def restore(src: Path, data_dir: Path, open_target: Any) -> tuple[Report, Any]:
    """Files and state; ``open_target()`` opens the (empty) target state. Returns the report and the
    open state (the caller closes it after the index is rebuilt)."""
    started = time.monotonic()
    report = Report(data_dir)
    check_empty(data_dir)
    try:
        tar = tarfile.open(src, "r:*")  # noqa: SIM115 (closed by the with below: its errors are ours to word)
    except tarfile.ReadError:
        raise RestoreError(f"{src} is not a kith backup (not a tar archive)") from None
    except (OSError, tarfile.TarError) as exc:
        raise RestoreError(f"cannot read {src}: {exc}") from None
    with tar:
        manifest = read_manifest(tar)
        report.files = extract_files(tar, manifest, data_dir)
        state = open_target()
        try:
            report.tables = load_state(tar, manifest, state)
        except BaseException:
            state.close()
            raise
    report.seconds = time.monotonic() - started
    return report, state
