"""``kith sessions search --user U QUERY``: past conversations, excerpts grouped by date.

Ranked by the same hybrid recall as ``kith memory search`` restricted to transcript turns, so
"that restaurant Sam liked" finds the turn even without the exact words. ``--exact`` instead
greps the Markdown session logs for a regular expression (no index needed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.cli.common import load_or_exit
from gateway.cli.daemon import DaemonError, recall_hits
from gateway.memory.files.errors import InvalidPatternError
from gateway.memory.files.scopes import ScopeError, user_scope
from gateway.memory.search.index import IndexBusyError
from gateway.util.safetext import printable

if TYPE_CHECKING:  # imported where used: `kith sessions --help` must not load numpy, Qdrant, the embedder
    from gateway.memory.search.recall import Hit
    from gateway.memory.search.service import MemoryService

_STOP = frozenset(
    ("a", "an", "and", "are", "did", "do", "does", "for", "from", "had", "has", "have", "how", "in", "is", "it",
     "me", "my", "of", "on", "or", "the", "to", "was", "we", "were", "what", "when", "where", "which", "who",
     "why", "with", "you", "your")
)  # fmt: skip
EXCERPT_CHARS = 240


@dataclass(frozen=True, slots=True)
class Excerpt:
    date: str
    time: str
    source: str
    text: str
    score: float


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("sessions", help="search past session logs")
    ssub = parser.add_subparsers(dest="sessions_command", metavar="ACTION")
    p = ssub.add_parser("search", help="find past conversations, grouped by date")
    p.add_argument("--user", required=True)
    p.add_argument("--k", type=int, default=20, help="number of excerpts (default 20)")
    p.add_argument("--exact", action="store_true", help="regular-expression grep over the logs instead")
    p.add_argument("--json", action="store_true")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    p.add_argument("query", nargs="+")
    p.set_defaults(func=_main)
    parser.set_defaults(func=lambda a: (parser.print_help(), 2)[1])


def highlighter(query: str) -> re.Pattern[str] | None:
    """A pattern for the query's content words; each matches its inflections too ("hike" ~ "hiking")."""
    words = [w for w in re.findall(r"\w+", query.lower()) if len(w) > 2 and w not in _STOP]
    if not words:
        return None
    stems = sorted({re.escape(_stem(w)) for w in words}, key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(stems) + r")\w*", re.IGNORECASE)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def highlight(text: str, pattern: re.Pattern[str] | None, *, ansi: bool) -> str:
    if pattern is None:
        return text
    open_, close = ("\x1b[1;33m", "\x1b[0m") if ansi else ("**", "**")
    return pattern.sub(lambda m: f"{open_}{m.group(0)}{close}", text)


def excerpt(text: str, pattern: re.Pattern[str] | None) -> str:
    """The part of ``text`` around the first highlighted word, on one line."""
    flat = " ".join(text.split())
    if len(flat) <= EXCERPT_CHARS:
        return flat
    m = pattern.search(flat) if pattern else None
    start = max(0, (m.start() if m else 0) - EXCERPT_CHARS // 3)
    return ("…" if start else "") + flat[start : start + EXCERPT_CHARS] + "…"


async def grep(svc: MemoryService, user: str, query: str, k: int) -> list[Excerpt]:
    """``--exact``: the files themselves, no index needed (works while the daemon holds it)."""
    store = svc.stores.store_for(user_scope(user))
    hits = await asyncio.to_thread(store.grep, query, "sessions")
    return [Excerpt(h.path[9:19], "", h.path, h.line, 1.0) for h in hits[:k]]


def excerpts(found: list[Hit]) -> list[Excerpt]:
    # The indexed text starts with "[weekday date time]"; the grouping shows the date already.
    return [
        Excerpt(h.date[:10], h.date[11:16], h.source, re.sub(r"^\[[^\]]*\]\s*", "", h.text), h.score) for h in found
    ]


async def find(svc: MemoryService, user: str, query: str, k: int, exact: bool) -> list[Excerpt]:
    if exact:
        return await grep(svc, user, query, k)
    return excerpts(await svc.recall(scope=user_scope(user), query=query, k=k, kinds=("turn",)))


def _main(args: argparse.Namespace) -> int:
    config = load_or_exit(args)
    query = " ".join(args.query)

    async def go() -> list[Excerpt] | int:
        from gateway.memory.search.service import MemoryService
        from gateway.plugins import indexes_live

        svc = MemoryService(config, live_indexing=indexes_live(config.plugins))
        if args.exact:
            try:
                return await grep(svc, args.user, query, args.k)
            except (ScopeError, InvalidPatternError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
        try:
            await svc.start()
        except IndexBusyError as exc:
            # The running daemon holds the embedded index: ask it.
            try:
                hits = await recall_hits(config, args.user, query, args.k, kinds=("turn",))
            except DaemonError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            if hits is not None:
                return excerpts(hits)
            print(f"error: {exc}, and its daemon does not answer; use --exact, stop it or configure "
                  "memory.qdrant_url", file=sys.stderr)
            return 3
        try:
            return await find(svc, args.user, query, args.k, args.exact)
        except (ScopeError, InvalidPatternError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        finally:
            await svc.close()

    result = asyncio.run(go())
    if isinstance(result, int):
        return result
    if args.json:
        print(json.dumps([_as_dict(e) for e in result], ensure_ascii=False, indent=2))
        return 0
    ansi = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    pattern = re.compile(query, re.IGNORECASE) if args.exact else highlighter(query)
    by_date: dict[str, list[Excerpt]] = defaultdict(list)
    for e in result:
        by_date[e.date or "undated"].append(e)
    if not by_date:
        print("no matching sessions")
    for day in sorted(by_date, reverse=True):
        print(day)
        for e in sorted(by_date[day], key=lambda x: x.time):
            stamp = f"{e.time} " if e.time else ""
            # Names and text were written by chat participants: no raw control characters to the terminal.
            print(f"  {stamp}{highlight(printable(excerpt(e.text, pattern)), pattern, ansi=ansi)}")
    return 0


def _as_dict(e: Excerpt) -> dict[str, object]:
    return {"date": e.date, "time": e.time, "source": e.source, "text": e.text, "score": e.score}

