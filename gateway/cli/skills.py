"""``kith skills list | show``: the skills a persona's turns can load, and one skill's instructions
(docs/skills.md). Reads the folders only; a running gateway sees the same files at its next turn."""

from __future__ import annotations

import argparse
import json
import sys

from gateway import skills
from gateway.cli.common import load_or_exit


def _catalogue(args: argparse.Namespace) -> skills.Catalogue:
    cfg = load_or_exit(args)
    return skills.catalogue(skills.sources(cfg, args.persona or cfg.personas.default))


def _report(problems: tuple[skills.Problem, ...]) -> None:
    for p in problems:
        print(f"left out: {p.message}", file=sys.stderr)


def _list(args: argparse.Namespace) -> int:
    book = _catalogue(args)
    if args.json:
        print(json.dumps({"skills": [{"name": s.name, "description": s.description, "origin": s.origin,
                                      "path": str(s.root)} for s in book.skills],
                          "problems": [{"path": str(p.path), "message": p.message} for p in book.problems]},
                         indent=2))  # fmt: skip
    else:
        for s in book.skills:
            print(f"{s.name:<24} {s.origin:<16} {s.description}")
        if not book.skills:
            print("no skills (tools.skills.dirs, or <data_dir>/personas/<name>/skills/)")
    _report(book.problems)
    return 1 if book.problems else 0


def _show(args: argparse.Namespace) -> int:
    book = _catalogue(args)
    skill = book.get(args.name)
    if skill is None:
        print(f"error: no skill named {args.name!r}", file=sys.stderr)
        _report(book.problems)
        return 2
    try:
        _, body = skills.read_skill(skill.root, skill.origin)
    except skills.SkillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{skill.name} ({skill.origin}, {skill.root})\n{skill.description}\n")
    print(body)
    listed = skills.files(skill)
    if listed:
        print("\nfiles: " + ", ".join(listed))
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("skills", help="list skills and show one's instructions")
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the skills a persona's turns can load (exit 1 if one is broken)")
    listing.add_argument("--persona", default="", help="whose persona skills (default: personas.default)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_list)
    show = actions.add_parser("show", help="one skill's description, instructions and files")
    show.add_argument("name")
    show.add_argument("--persona", default="", help="whose persona skills (default: personas.default)")
    show.set_defaults(func=_show)
