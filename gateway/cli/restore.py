"""``kith restore SRC --data-dir NEW`` (gateway/ops/restore.py; docs/operations.md#backup): writes only
into NEW (and, with ``--state-url``, into that empty database)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from gateway.cli.backup import open_state_for
from gateway.cli.common import load_or_exit


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("restore", help="restore a backup into a new data directory")
    p.add_argument("src", help="a file written by kith backup")
    p.add_argument("--data-dir", required=True, help="the new data directory (absent or empty)")
    p.add_argument("--state-url", default=None,
                   help="restore the tables into this empty PostgreSQL database instead of NEW/state.sqlite")
    p.add_argument("--no-index", action="store_true",
                   help="do not rebuild the memory index now (the daemon's first start does it)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_restore)


def run_restore(args: argparse.Namespace) -> int:
    from gateway.ops.restore import RestoreError, rebuild_index, restore
    from gateway.state.errors import StorageError

    config = load_or_exit(args)
    new = Path(args.data_dir).resolve()
    update: dict[str, Any] = {"data_dir": new}
    target = config.model_copy(update=update)
    try:
        report, state = restore(Path(args.src), new, lambda: open_state_for(new, args.state_url))
    except (RestoreError, StorageError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        if not args.no_index:
            report.index = asyncio.run(rebuild_index(target))
    finally:
        state.close()
    rows = sum(report.tables.values())
    if args.json:
        print(json.dumps({"data_dir": str(new), "tables": report.tables, "files": report.files,
                          "index": report.index, "seconds": round(report.seconds, 3)}))
        return 0
    print(f"restored {report.files} files and {rows} rows into {new}"
          + (f" (state in {args.state_url.split('@')[-1]})" if args.state_url else ""))
    if args.no_index:
        print("the memory index is rebuilt from the Markdown when the daemon starts")
    else:
        print(f"memory index rebuilt: {len(report.index)} scopes, {sum(report.index.values())} chunks")
    print(f"next: set data_dir: {new}" + (" and state.url" if args.state_url else "")
          + " in the config, then start kith (migrations run on start)")
    return 0
