"""``kith state migrate --to postgresql://... [--from DATA_DIR|FILE] [--force]``: copy a SQLite
install's state into PostgreSQL, then compare every table's row count and checksum on both sides.

Stop the daemon first: rows written after the copy would be missing from it (the comparison then
fails, and says where). The target's schema is created by migrations; a target holding rows is
refused unless ``--force``, which empties it first. Exit 0 when every table matches, 1 on any
mismatch, 2 on a usage error. Afterwards set ``state.url`` in the config
(docs/configuration.md#state-sqlite-or-postgresql).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from gateway.cli.common import load_or_exit


def register(sub: Any) -> None:
    p = sub.add_parser("state", help="the state database: move a SQLite install to PostgreSQL")
    actions = p.add_subparsers(dest="action", required=True)
    m = actions.add_parser("migrate", help="copy <data_dir>/state.sqlite into PostgreSQL and verify every table")
    m.add_argument("--to", required=True, metavar="URL", help="postgresql://user:pass@host:5432/db")
    m.add_argument("--from", dest="source", default=None, metavar="PATH",
                   help="a data directory or a state.sqlite file (default: the config's data_dir)")  # fmt: skip
    m.add_argument("--force", action="store_true", help="empty a target that already holds rows")
    m.set_defaults(func=main)


def _source_path(args: argparse.Namespace) -> Path:
    if args.source:
        path = Path(args.source)
        return path / "state.sqlite" if path.is_dir() else path
    return Path(load_or_exit(args).data_dir) / "state.sqlite"


def compare(source: dict[str, tuple[int, str]], target: dict[str, tuple[int, str]]) -> tuple[list[str], bool]:
    """The report's lines (one per table) and whether every table matches."""
    head = f"{'table':<24}  {'source rows':>11}  {'target rows':>11}  checksum"
    lines, ok = [head, "-" * len(head)], True
    for table in sorted(set(source) | set(target)):
        s, t = source.get(table), target.get(table)
        if s is None or t is None:
            ok = False
            verdict = "MISSING in " + ("source" if s is None else "target")
        else:
            same = s == t
            ok &= same
            verdict = "ok" if same else ("MISMATCH (rows)" if s[0] != t[0] else "MISMATCH (content)")
        lines.append(f"{table:<24}  {s[0] if s else '-':>11}  {t[0] if t else '-':>11}  {verdict}")
    return lines, ok


def main(args: argparse.Namespace) -> int:
    from gateway.state import StorageError, is_postgres_url, open_state, open_state_url
    from gateway.state.transfer import clear_tables, dump_tables, load_tables, row_counts, table_checksums

    if not is_postgres_url(args.to):
        print(f"error: --to takes a postgresql:// URL, not {args.to!r}", file=sys.stderr)
        return 2
    path = _source_path(args)
    if not path.is_file():
        print(f"error: no SQLite state at {path}", file=sys.stderr)
        return 2
    try:
        source = open_state(path)
    except StorageError as exc:
        print(f"error: cannot open {path}: {exc}", file=sys.stderr)
        return 2
    try:
        target = open_state_url(args.to)
    except StorageError as exc:
        source.close()
        print(f"error: cannot open the target: {exc}", file=sys.stderr)
        return 2
    try:
        used = {t: n for t, n in row_counts(target).items() if n}
        if used and not args.force:
            print(f"error: the target already holds rows ({', '.join(f'{t}: {n}' for t, n in sorted(used.items()))});"
                  " pass --force to empty it first", file=sys.stderr)  # fmt: skip
            return 2
        if used:
            clear_tables(target)
        started = time.monotonic()
        copied = load_tables(target, dump_tables(source))
        took = time.monotonic() - started
        lines, ok = compare(table_checksums(source), table_checksums(target))
    except StorageError as exc:
        print(f"error: the copy failed: {exc}", file=sys.stderr)
        return 1
    finally:
        target.close()
        source.close()
    print("\n".join(lines))
    print(f"\ncopied {sum(copied.values())} rows of {len(copied)} tables in {took:.1f} s from {path}")
    if not ok:
        print("MISMATCH: the target differs from the source (was the daemon still running?)", file=sys.stderr)
        return 1
    print("every table matches: set state.url in the config to use PostgreSQL"
          " (docs/configuration.md#state-sqlite-or-postgresql)")
    return 0
