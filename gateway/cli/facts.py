"""``kith facts list | timeline | add | invalidate | delete``: the knowledge graph from the shell.

Works on ``<data_dir>/state.sqlite`` directly (WAL, so it is safe next to a running gateway).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway.cli.common import load_or_exit
from gateway.memory.knowledge.graph import Fact, KnowledgeGraph
from gateway.memory.knowledge.predicates import normalize_entity
from gateway.util.safetext import printable

DB_NAME = "state.sqlite"


def db_path(args: argparse.Namespace) -> Path:
    return Path(load_or_exit(args).data_dir) / DB_NAME


def _open(args: argparse.Namespace, *, create: bool) -> KnowledgeGraph | None:
    config = load_or_exit(args)
    if config.state.url is not None:  # PostgreSQL (state.url): the graph's rows are there
        from gateway.state import open_config_state

        return KnowledgeGraph(open_config_state(config), owned=True)
    path = db_path(args)
    if not path.exists() and not create:
        return None  # reading must not create an empty database as a side effect
    path.parent.mkdir(parents=True, exist_ok=True)
    return KnowledgeGraph(path)


def _show(facts: Sequence[Fact], as_json: bool) -> None:
    if as_json:
        print(json.dumps([f.as_dict() for f in facts], ensure_ascii=False, indent=2))
        return
    if not facts:
        print("no facts")
    for f in facts:
        until = f.valid_until.strftime("%Y-%m-%d %H:%M") if f.valid_until else "now"
        span = f"{f.valid_from:%Y-%m-%d %H:%M} -> {until}"
        src = f"{f.source_type}:{f.source_ref}" if f.source_ref else f.source_type
        meta = f"{span}; conf {f.confidence:.2f}; {src}"
        what = printable(f"{f.subject} {f.predicate} {f.object}")  # extracted from chat: no raw controls
        print(f"#{f.id:<5} [{f.user_id}] {what}  ({meta})")


def _list(args: argparse.Namespace) -> int:
    kg = _open(args, create=False)
    if kg is None:
        _show([], args.json)
        return 0
    with kg:
        try:
            facts = kg.all(args.user) if args.all else kg.current(args.user, as_of=args.as_of)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.entity:
        facts = about(facts, args.entity)
    _show(facts, args.json)
    return 0


def about(facts: Sequence[Fact], entity: str) -> list[Fact]:
    """The facts whose subject or object is ``entity`` (compared as the graph compares entities)."""
    key = normalize_entity(entity)
    return [f for f in facts if key in (normalize_entity(f.subject), normalize_entity(f.object))]


def _timeline(args: argparse.Namespace) -> int:
    kg = _open(args, create=False)
    facts = [] if kg is None else kg.timeline(args.entity, user_id=args.user)
    if kg is not None:
        kg.close()
    _show(facts, args.json)
    return 0


def _add(args: argparse.Namespace) -> int:
    kg = _open(args, create=True)
    assert kg is not None
    with kg:
        try:
            res = kg.add(
                args.user, args.subject, args.predicate, args.object,
                valid_from=args.valid_from, valid_until=args.valid_until, confidence=args.confidence,
                source_type="cli", source_ref=args.source_ref,
            )  # fmt: skip
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    print(f"{res.status} #{res.fact.id}" + (f"; superseded {list(res.superseded)}" if res.superseded else ""))
    return 0


def _invalidate(args: argparse.Namespace) -> int:
    kg = _open(args, create=False)
    if kg is None:
        print(f"no fact #{args.id}", file=sys.stderr)
        return 1
    with kg:
        try:
            done = kg.invalidate(args.id, at=args.at)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if done:
        print(f"invalidated #{args.id}")
    else:
        print(f"no current fact #{args.id}", file=sys.stderr)
    return 0 if done else 1


def _delete(args: argparse.Namespace) -> int:
    kg = _open(args, create=False)
    done = kg is not None and kg.delete(args.id)
    if kg is not None:
        kg.close()
    if done:
        print(f"deleted #{args.id}")
    else:
        print(f"no fact #{args.id}", file=sys.stderr)
    return 0 if done else 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("facts", help="inspect and edit the knowledge graph")
    fsub = parser.add_subparsers(dest="facts_command", metavar="ACTION", required=True)

    p = fsub.add_parser("list", help="facts valid now (or --as-of), or --all")
    p.add_argument("--user", default=None, help="scope: a user id or channel:<key> (default: all)")
    p.add_argument("--as-of", default=None, help="a date or timestamp (ISO; naive means UTC)")
    p.add_argument("--all", action="store_true", help="include ended facts")
    p.add_argument("--entity", default=None, help="only facts whose subject or object is this entity")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_list)

    p = fsub.add_parser("timeline", help="every fact ever held about ENTITY, oldest first")
    p.add_argument("entity")
    p.add_argument("--user", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_timeline)

    p = fsub.add_parser("add", help="add a fact (single-valued predicates supersede)")
    p.add_argument("--user", required=True, help="scope: a user id or channel:<key>")
    p.add_argument("subject")
    p.add_argument("predicate")
    p.add_argument("object")
    p.add_argument("--valid-from", default=None)
    p.add_argument("--valid-until", default=None)
    p.add_argument("--confidence", type=float, default=1.0)
    p.add_argument("--source-ref", default="", help="provenance; the same ref twice is one fact")
    p.set_defaults(func=_add)

    p = fsub.add_parser("invalidate", help="end a fact's validity now (kept in the timeline)")
    p.add_argument("id", type=int)
    p.add_argument("--at", default=None, help="when it stopped being true (default: now)")
    p.set_defaults(func=_invalidate)

    p = fsub.add_parser("delete", help="delete a wrong fact outright")
    p.add_argument("id", type=int)
    p.set_defaults(func=_delete)
