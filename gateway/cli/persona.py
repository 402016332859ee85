"""``kith persona new | list | import | export``: create personas from templates or Character Cards,
see which one speaks where, and take cards and lorebooks in and out (docs/personas.md).

Works on ``<data_dir>/personas/`` through the guarded memory store, so it is safe next to a running
gateway (which re-indexes the files at its next start, or when they are edited while it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from gateway.cli.common import load_or_exit
from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.stores import Stores
from gateway.personas import PERSONA_FILES, PersonaError, bootstrap, persona_root, source_for, templates
from gateway.personas.card_export import export_card, export_lorebook
from gateway.personas.card_import import import_card, import_lorebook
from gateway.personas.cards import CardError, Limits
from gateway.personas.lore import CHARACTER_BOOK, WORLD_INFO


def _new(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args)
    data_dir = Path(cfg.data_dir)
    try:
        source = source_for(data_dir, args.template, max_file_bytes=cfg.memory.max_file_bytes)
        store = Stores.of(cfg).unwatched(persona_root(data_dir, args.name))
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
    found = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.is_symlink()
                   and not p.name.startswith(".")) if base.is_dir() else []  # dot-names: imports in progress
    pc = cfg.personas
    rows = []
    for name in sorted({*found, *pc.names()}):
        root = base / name
        used = (["default"] if name == pc.default else []) + [f"channel {c}" for c, n in pc.channels.items()
                                                              if n == name]
        used += [f"conversation {k}" for k, n in pc.conversations.items() if n == name]
        lore = root / "lore"
        books = sorted(p.name for p in lore.iterdir()
                       if p.is_dir() and not p.name.startswith(".")) if lore.is_dir() else []
        rows.append({"name": name, "exists": (root / "IDENTITY.md").is_file(),
                     "files": [f for f in PERSONA_FILES if (root / f).is_file()], "used_by": used,
                     "card": (root / "card" / "card.json").is_file(), "lorebooks": books})
    if args.json:
        print(json.dumps({"personas": rows, "templates": templates()}, indent=2))
        return 0
    for r in rows:
        state = "" if r["exists"] else "  (missing: created from the template at the next start)"
        print(f"{r['name']:<20} {', '.join(r['used_by']) or 'unused'}{state}")
    print(f"templates: {', '.join(templates())}")
    return 0


def _read_input(path: str, limit: int) -> bytes:
    if path == "-":
        data = sys.stdin.buffer.read(limit + 1)
    else:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)  # never more than the limit plus one byte, whatever the file's size
    if len(data) > limit:
        raise CardError(f"the file is larger than {limit:,} bytes, the limit for a card or lorebook")
    return data


def _import(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args)
    data_dir = Path(cfg.data_dir)
    limits = Limits(max_entries=args.max_entries, max_field_bytes=cfg.memory.max_file_bytes)
    try:
        blob = _read_input(args.file, limits.max_file_bytes)
        if args.lore:
            fmt, n = import_lorebook(data_dir, args.lore, args.book or Path(args.file).stem or "lore", blob,
                                     limits=limits, overwrite=args.force)  # fmt: skip
            result = {"persona": args.lore, "book": args.book or Path(args.file).stem, "format": fmt, "entries": n}
            text = f"imported {n} lore entries ({fmt}) into persona {args.lore}"
        else:
            got = import_card(data_dir, args.name, blob, limits=limits, overwrite=args.force,
                              max_file_bytes=cfg.memory.max_file_bytes)  # fmt: skip
            result = {"persona": got.name, "root": str(got.root), "spec": got.spec, "lore_entries": got.entries,
                      "image": got.image, "warnings": list(got.warnings)}
            text = (f"imported {got.spec} card as persona {got.name} in {got.root}"
                    f" ({got.entries} lore entries{', image kept' if got.image else ''})")
            text += "".join(f"\nwarning: {w}" for w in got.warnings)
    except (CardError, PersonaError, MemoryStoreError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else text)
    if not args.lore and not args.json and args.name not in cfg.personas.names():
        print(f"to use it: /persona {result['persona']} in a chat, or name it in personas.default / channels")
    return 0


def _write_output(path: str | None, data: bytes) -> None:
    if path in (None, "-"):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    assert path is not None
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _export(args: argparse.Namespace) -> int:
    cfg = load_or_exit(args)
    data_dir = Path(cfg.data_dir)
    try:
        if args.lore:
            fmt = args.format or "lorebook_v3"
            if fmt not in ("lorebook_v3", CHARACTER_BOOK, WORLD_INFO):
                raise CardError(f"unknown lorebook format {fmt!r} (lorebook_v3, {CHARACTER_BOOK}, {WORLD_INFO})")
            book = export_lorebook(data_dir, args.name, args.lore, fmt)
            data = json.dumps(book, ensure_ascii=False, indent=2).encode("utf-8")
        else:
            fmt = args.format or ("png" if args.output and args.output.lower().endswith(".png") else "v3")
            if fmt == "png" and args.output in (None, "-") and sys.stdout.isatty():
                raise CardError("a PNG goes to a file: add -o NAME.png")
            data = export_card(data_dir, args.name, fmt)
        _write_output(args.output, data)
    except (CardError, PersonaError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output not in (None, "-"):
        print(f"wrote {args.output} ({len(data):,} bytes)", file=sys.stderr)
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

    p = psub.add_parser("import", help="a Character Card (V3/V2, PNG or JSON) as a persona, or a lorebook into one",
                        description="FILE is a card (.png with a ccv3/chara chunk, or .json), or with --lore a "
                        "lorebook (Character Card lorebook, lorebook_v3 or SillyTavern World Info JSON). "
                        "Nothing is written unless the whole file imports.")  # fmt: skip
    p.add_argument("file", help="the file, or - for stdin")
    p.add_argument("--name", default=None, help="persona name (default: from the card's name)")
    p.add_argument("--lore", metavar="PERSONA", default=None, help="import FILE as a lorebook into PERSONA's lore/")
    p.add_argument("--book", default=None, help="with --lore: the book's folder under lore/ (default: file name)")
    p.add_argument("--force", action="store_true", help="replace an existing persona or book")
    p.add_argument("--max-entries", type=int, default=Limits().max_entries,
                   help=f"refuse lorebooks with more entries (default {Limits().max_entries})")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_import)

    p = psub.add_parser("export", help="a persona as a Character Card (v3, v2, png), or one of its lorebooks",
                        description="Cards: v3 or v2 JSON, or png (the original image, or a blank one, with both "
                        "a ccv3 and a chara chunk). Lorebooks (--lore BOOK; the card's own is 'card'): "
                        "lorebook_v3, character_book or st-world-info.")  # fmt: skip
    p.add_argument("name")
    p.add_argument("--format", default=None, help="v3 (default), v2, png; with --lore: lorebook_v3 (default), "
                   "character_book, st-world-info")  # fmt: skip
    p.add_argument("--lore", metavar="BOOK", default=None, help="export the lorebook lore/BOOK/ instead of the card")
    p.add_argument("-o", "--output", default=None, help="file to write (default: stdout)")
    p.set_defaults(func=_export)
