"""``kith persona new | list``: create personas from templates and see which one speaks where.

Works on ``<data_dir>/personas/`` through the guarded memory store, so it is safe next to a running
gateway (which re-indexes the files at its next start, or when they are edited while it runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gateway.cli.common import load_or_exit
from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.store import MemoryStore
from gateway.personas import PERSONA_FILES, PersonaError, bootstrap, persona_root, source_for, templates


def _new(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args)
    data_dir = Path(cfg.data_dir)
    try:
        source = source_for(data_dir, args.template, max_file_bytes=cfg.memory.max_file_bytes)
        store = MemoryStore(persona_root(data_dir, args.name), max_file_bytes=cfg.memory.max_file_bytes)
        created = bootstrap(store, args.name, template=args.template, source_store=source, title=args.title,
                            overwrite=args.force)
    except (PersonaError, MemoryStoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"created persona {created.name} in {created.root} from {created.source}: {', '.join(created.files)}")
    if args.name not in cfg.personas.names():
        print(f"to use it, set personas.default, personas.channels or personas.conversations to {args.name!r}")
    return 0


def _list(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args)
    base = Path(cfg.data_dir) / "personas"
    found = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.is_symlink()) if base.is_dir() else []
    pc = cfg.personas
    rows = []
    for name in sorted({*found, *pc.names()}):
        root = base / name
        used = (["default"] if name == pc.default else []) + [f"channel {c}" for c, n in pc.channels.items()
                                                              if n == name]
        used += [f"conversation {k}" for k, n in pc.conversations.items() if n == name]
        rows.append({"name": name, "exists": (root / "IDENTITY.md").is_file(),
                     "files": [f for f in PERSONA_FILES if (root / f).is_file()], "used_by": used})
    if args.json:
        print(json.dumps({"personas": rows, "templates": templates()}, indent=2))
        return 0
    for r in rows:
        state = "" if r["exists"] else "  (missing: created from the template at the next start)"
        print(f"{r['name']:<20} {', '.join(r['used_by']) or 'unused'}{state}")
    print(f"templates: {', '.join(templates())}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("persona", help="create and list personas")
    psub = parser.add_subparsers(dest="persona_command", metavar="ACTION", required=True)

    p = psub.add_parser("new", help="create <data_dir>/personas/NAME/ from a template or another persona")
    p.add_argument("name")
    p.add_argument("--from", dest="template", default="default",
                   help=f"a shipped template ({', '.join(templates())}) or an existing persona (default: default)")
    p.add_argument("--title", default=None, help="display name used in the files (default: from NAME)")
    p.add_argument("--force", action="store_true", help="overwrite an existing persona's files")
    p.set_defaults(func=_new)

    p = psub.add_parser("list", help="personas on disk and in the config, and where each one speaks")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_list)
