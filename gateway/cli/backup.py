"""``kith backup DEST`` (gateway/ops/backup.py; docs/operations.md#backup): works while the daemon runs;
``kith restore`` is gateway/cli/restore.py."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gateway.cli.common import load_or_exit


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("backup", help="write a consistent backup of state, Markdown memory and personas")
    p.add_argument("dest", help="the backup file to create: NAME.tar, or NAME.tar.gz / NAME.tgz to compress")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_backup)


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("kith")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _state_url(config: Any) -> str | None:
    from gateway.ops.doctor import state_url

    return state_url(config)


def open_state_for(data_dir: Path, url: str | None) -> Any:
    if url:
        from gateway.state import open_state_url  # type: ignore[attr-defined]

        return open_state_url(url)
    from gateway.state import open_state

    return open_state(Path(data_dir) / "state.sqlite")


def run_backup(args: argparse.Namespace) -> int:
    from gateway.ops.backup import BackupError, write_backup
    from gateway.state.errors import StorageError

    config = load_or_exit(args)
    url = _state_url(config)
    data_dir = Path(config.data_dir)
    if not url and not (data_dir / "state.sqlite").exists():
        print(f"error: no kith install at {data_dir} (no state.sqlite)", file=sys.stderr)
        return 2
    try:
        state = open_state_for(data_dir, url)
        try:
            report = write_backup(state, data_dir, Path(args.dest), kith_version=_version(),
                                  state_kind="postgresql" if url else "sqlite")
        finally:
            state.close()
    except (BackupError, StorageError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = sum(n for n, _ in report.tables.values())
    if args.json:
        print(json.dumps({"path": str(report.path), "tables": len(report.tables), "rows": rows,
                          "files": report.files, "bytes": report.bytes, "reread": report.retried,
                          "seconds": round(report.seconds, 3)}))
    else:
        print(f"wrote {report.path}: {len(report.tables)} tables ({rows} rows), {report.files} files "
              f"({report.bytes / 1e6:.1f} MB) in {report.seconds:.1f} s")
    return 0
