"""``kith memory search | stats | reindex | index``: the memory index from the shell.

``index conversation SESSION_ID`` re-indexes the session logs that hold a conversation's turns (the
day files of its person or group); ``index file PATH --user ID`` one file of a person's memory.

These open the index themselves. The embedded index is single-process: while a gateway runs on the
same data directory they ask it instead, through its API (``/api/users/{uid}/recall``,
``/api/memory/*``); a reindex then runs as ``memory.rebuild`` jobs on the daemon. Exit 3 only when
the index is busy and no daemon answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from gateway.cli.common import load_or_exit, user_store
from gateway.cli.daemon import DaemonError, ask_daemon, recall_hits
from gateway.config import Config
from gateway.memory.files.scopes import ScopeError, user_scope
from gateway.memory.search.index import IndexBusyError
from gateway.util.safetext import printable

if TYPE_CHECKING:  # imported where used: `kith memory --help` must not load numpy, Qdrant, the embedder
    from gateway.memory.files.store import MemoryStore
    from gateway.memory.search.recall import Hit
    from gateway.memory.search.service import MemoryService


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("memory", help="search, inspect and rebuild the memory index")
    msub = parser.add_subparsers(dest="memory_command", metavar="ACTION")

    p = msub.add_parser("search", help="hybrid recall over one user's memory")
    p.add_argument("--user", required=True, help="user id (users/<id>/)")
    p.add_argument("--k", type=int, default=8, help="number of results (default 8)")
    p.add_argument("--json", action="store_true", help="print hits as JSON")
    p.add_argument("--topic", default="", help="only memories of this dominant topic")
    p.add_argument("--entity", default="", help="only memories naming this entity (a person, a place...)")
    p.add_argument("--since", default="", help="only memories dated on or after this day (YYYY-MM-DD)")
    p.add_argument("query", nargs="+", help="what to look for")
    p.set_defaults(func=lambda a: _run(a, _search), func_name="search")

    p = msub.add_parser("stats", help="points per scope, model and backend")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda a: _run(a, _stats), func_name="stats")

    p = msub.add_parser("reindex", help="rebuild the index from the Markdown files")
    p.add_argument("--user", default=None, help="only this user (default: every root)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda a: _run(a, _reindex), func_name="reindex")

    p = msub.add_parser("index", help="index one conversation or one file now")
    isub = p.add_subparsers(dest="index_kind", metavar="WHAT", required=True)
    q = isub.add_parser("conversation", help="the session logs holding a conversation's turns")
    q.add_argument("session_id", help="the conversation's session id (kith sessions list)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=lambda a: _run(a, _index), func_name="index")
    q = isub.add_parser("file", help="one file of a person's memory")
    q.add_argument("path", help="the file, relative to users/<id>/ (e.g. topics/tea.md)")
    q.add_argument("--user", required=True, help="user id (users/<id>/)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=lambda a: _run(a, _index), func_name="index")

    p = msub.add_parser("rollback", help="undo a USER.md curation run or a memory-writer run (default: the latest "
                                          "curation run that changed USER.md)")  # fmt: skip
    p.add_argument("--user", required=True, help="user id (users/<id>/)")
    p.add_argument("--run", default=None,
                   help="run id from USER.md.audit.jsonl, or a writer run id (writer-...) from "
                        "_history/writer.audit.jsonl (default: the latest run)")  # fmt: skip
    p.add_argument("--writer", action="store_true",
                   help="undo a memory-writer run (people/, topics/, the session summary): every file it changed, "
                        "or none")  # fmt: skip
    p.add_argument("--force", action="store_true", help="restore even if a file changed after that run")
    p.add_argument("--file", default="USER.md",
                   choices=("USER.md", "PATTERNS.md", "WORKING.md", "MEMORY_MID.md", "MEMORY_LONG.md"),
                   help="the file whose run to undo: the curated USER.md (default) or PATTERNS.md, or a file a "
                        "model rewrites whole (WORKING.md by compaction, MEMORY_MID/LONG.md by distillation)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_rollback)
    parser.set_defaults(func=lambda a: (parser.print_help(), 2)[1])


def _run(args: argparse.Namespace, action: Callable[[MemoryService, argparse.Namespace], Awaitable[int]]) -> int:
    config = load_or_exit(args)

    async def go() -> int:
        from gateway.memory.search.service import MemoryService
        from gateway.plugins import indexes_live

        svc = MemoryService(config, live_indexing=indexes_live(config.plugins))
        try:
            await svc.start()
        except IndexBusyError as exc:
            # The running daemon holds the embedded index: ask it instead.
            try:
                answered = await _via_daemon(config, args)
            except DaemonError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            if answered is not None:
                return answered
            print(f"error: {exc}, and its daemon does not answer on port {config.server.port}; "
                  "stop it or configure memory.qdrant_url", file=sys.stderr)
            return 3
        try:
            return await action(svc, args)
        except ScopeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        finally:
            await svc.close()

    return asyncio.run(go())


async def _via_daemon(config: Config, args: argparse.Namespace) -> int | None:
    action = args.func_name
    if action == "search":
        filters = {"topic": args.topic, "entity": args.entity, "since": args.since}
        hits = await recall_hits(config, args.user, " ".join(args.query), args.k, filters=filters)
        return None if hits is None else _print_hits(hits, args)
    if action == "stats":
        out = await ask_daemon(config, "GET", "/api/memory/stats")
        return None if out is None else _print_stats(out, args)
    if action == "reindex":
        out = await ask_daemon(config, "POST", "/api/memory/reindex", {"user": args.user} if args.user else {})
        if out is not None:
            print(json.dumps(out) if args.json else f"queued a rebuild of {len(out['queued'])} scopes on the daemon")
            return 0
    return None


async def _search(svc: MemoryService, args: argparse.Namespace) -> int:
    from gateway.memory.search.index import narrowing

    try:
        narrow = narrowing(args.topic, args.entity, args.since)
    except ValueError as exc:
        print(f"error: --since: {exc}", file=sys.stderr)
        return 2
    hits = await svc.recall(scope=user_scope(args.user), query=" ".join(args.query), k=args.k, narrow=narrow)
    return _print_hits(hits, args)


def _print_hits(hits: list[Hit], args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([asdict(h) for h in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print("no memories found")
    for i, h in enumerate(hits, 1):
        when = f" {h.date[:10]}" if h.date else ""
        labels = (f" topic={h.topic}" if h.topic else "") + (f" entities={','.join(h.entities)}" if h.entities else "")
        print(f"{i:>2}. [{h.score:.3f}] {printable(h.source)}{when} ({h.chunk_id}){printable(labels)}")
        for line in h.text.strip().splitlines()[:6]:
            print(f"      {printable(line)}")  # chat participants wrote it: no raw control characters
    return 0


async def _stats(svc: MemoryService, args: argparse.Namespace) -> int:
    return _print_stats(await svc.report(), args)


def _print_stats(out: dict[str, Any], args: argparse.Namespace) -> int:
    scopes = out["scopes"]
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"backend {out['backend']}, model {out['embedding_model']}, {out['points']} points")
    for scope, s in scopes.items():
        print(f"  {scope:<32} {s['files']:>6} files {s['bytes']:>10} bytes {s['points']:>8} points")
    return 0


async def _index(svc: MemoryService, args: argparse.Namespace) -> int:
    if args.index_kind == "file":
        targets = [(user_scope(args.user), args.path)]
    else:
        found = await asyncio.to_thread(conversation_logs, svc.config, args.session_id)
        if found is None:
            print(f"error: no conversation {args.session_id!r}", file=sys.stderr)
            return 2
        targets = found
    out: dict[str, Any] = {}
    for scope, rel in targets:
        report = await svc.indexing.index_file(scope, rel)
        out[f"{scope}/{rel}"] = asdict(report)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if not out:
        print("nothing logged for that conversation")
    for where, r in out.items():
        print(f"{where}: {r['embedded']} chunks embedded")
    return 0


def conversation_logs(config: Config, session_id: str) -> list[tuple[str, str]] | None:
    """(scope, session log) of every day file holding turns of ``session_id``; None: no such session."""
    from gateway.memory.background import jobscope
    from gateway.memory.files.scopes import channel_scope
    from gateway.memory.files.session_log import day_log_path
    from gateway.state import open_config_state

    state = open_config_state(config)
    try:
        session = state.sessions.get(session_id)
        if session is None:
            return None
        rows = state.turns.after(session_id)
        # Each turn is logged in the day file of its speaker's calendar (as the session log writes it).
        users = {uid: state.users.get(uid) for uid in {r.user_id for r in rows}}
        zones = {uid: u.timezone if u is not None else "" for uid, u in users.items()}
    finally:
        state.close()
    # A group's log is the group's (its channel root); a direct conversation's is the person's.
    group = session.scope_key.startswith("conv:")
    scope = channel_scope(session.conversation_key) if group else user_scope(session.user_id)
    return sorted({(scope, day_log_path(r.created_at, jobscope.zone(zones[r.user_id] or None))) for r in rows})


async def _reindex(svc: MemoryService, args: argparse.Namespace) -> int:
    reports = await svc.indexing.reindex(args.user)
    if args.json:
        print(json.dumps({scope: asdict(r) for scope, r in reports.items()}, indent=2))
        return 0
    if not reports:
        print("no memory roots found")
    for scope, r in reports.items():
        print(f"{scope}: {r.files} files, {r.embedded} chunks embedded")
    return 0


def _rollback(args: argparse.Namespace) -> int:
    """Works on the files alone (no index needed, so it also runs next to a live gateway, whose index
    picks the restored USER.md up through its sync)."""
    from gateway.memory.curation import audit, rollback

    config = load_or_exit(args)
    store = user_store(config, args.user)
    if store is None:
        return 2
    if args.writer or (args.run or "").startswith("writer-"):
        return _rollback_writer(store, args)
    run_id = args.run
    if run_id is None:
        records = list(audit.read_records(store, args.file))
        undone = {r.get("run_id") for r in records if r.get("type") == "rollback"}
        written = [r for r in records if r.get("type") == "run" and r.get("written") and r.get("run_id") not in undone]
        if not written:
            print(f"nothing to roll back: no curation run changed {args.file}", file=sys.stderr)
            return 1
        run_id = str(written[-1]["run_id"])
    result = rollback(store, run_id, rel=args.file, force=args.force)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(f"{result.run_id}: {result.status}{f' ({result.detail})' if result.detail else ''}")
    return 0 if result.status in ("restored", "already_restored") else 1


def _rollback_writer(store: MemoryStore, args: argparse.Namespace) -> int:
    """Undo a memory-writer run as a whole: every file it changed goes back to its pre-run bytes (a
    file the run created is removed), or, when one changed since, none (without ``--force``)."""
    from gateway.memory.background import writer_ops

    run_id = args.run
    if run_id is None:
        undone = {r.get("run_id") for r in _writer_rollbacks(store)}
        runs = [r for r in writer_ops.runs(store) if r.get("run_id") not in undone]
        if not runs:
            print("nothing to roll back: no memory-writer run in _history/writer.audit.jsonl", file=sys.stderr)
            return 1
        run_id = str(runs[-1]["run_id"])
    result = writer_ops.rollback_run(store, run_id, force=args.force)
    if result.status == "restored":
        writer_ops.note_rollback(store, run_id)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(f"{result.run_id}: {result.status}{f' ({result.detail})' if result.detail else ''}")
        for f in result.files:
            print(f"  {printable(f.file)}: {f.status}{f' ({f.detail})' if f.detail else ''}")
    return 0 if result.status in ("restored", "already_restored") else 1


def _writer_rollbacks(store: MemoryStore) -> list[dict[str, Any]]:
    from gateway.memory.background import writer_ops
    from gateway.memory.curation import audit

    return [r for r in audit.read_records(store, writer_ops.JOURNAL) if r.get("type") == "rollback"]

