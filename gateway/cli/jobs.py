"""``kith jobs status | dead | retry ID``: look into the job bus of a running daemon (or bus.url)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict
from typing import Any

from gateway.bus import BusError, JobBus
from gateway.cli.common import load_or_exit
from gateway.config import Config


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("jobs", help="job bus: queue status, dead letters, retry")
    jsub = parser.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)
    p = jsub.add_parser("status", help="per queue: pending, in flight, delayed, oldest age, dead letters")
    p.add_argument("--json", action="store_true", help="one JSON object per queue")
    p.set_defaults(func=lambda a: _run(a, _status))
    p = jsub.add_parser("dead", help="dead letters, newest first, with their errors")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.add_argument("--full", action="store_true", help="print whole tracebacks")
    p.set_defaults(func=lambda a: _run(a, _dead))
    p = jsub.add_parser("retry", help="queue a dead letter again (by job id or dead-letter entry id)")
    p.add_argument("id")
    p.set_defaults(func=lambda a: _run(a, _retry))


def _run(args: argparse.Namespace, action: Callable[[JobBus, argparse.Namespace], Awaitable[int]]) -> int:
    config: Config = load_or_exit(args)

    async def main() -> int:
        async with JobBus(config, own_server=False) as bus:
            return await action(bus, args)

    try:
        return asyncio.run(main())
    except BusError as exc:
        print(f"kith jobs: {exc}", file=sys.stderr)
        return 1


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


def _json_lines(records: Iterable[Any]) -> int:
    """``--json``: one JSON object per line (a dataclass each), for ``jq`` and scripts."""
    for record in records:
        print(json.dumps(asdict(record)))
    return 0


async def _status(bus: JobBus, args: argparse.Namespace) -> int:
    queues = await bus.status()
    if args.json:
        return _json_lines(queues)
    if not queues:
        print("no queues yet")
        return 0
    print(f"{'QUEUE':<24} {'PENDING':>8} {'IN FLIGHT':>9} {'DELAYED':>8} {'OLDEST':>8} {'DEAD':>6} {'WORKERS':>7}")
    for q in queues:
        print(
            f"{q.name:<24} {q.pending:>8} {q.in_flight:>9} {q.delayed:>8} {_age(q.oldest_age_s):>8} "
            f"{q.dead:>6} {q.consumers:>7}"
        )
    return 0


async def _dead(bus: JobBus, args: argparse.Namespace) -> int:
    letters = await bus.dead(args.limit)
    if args.json:
        return _json_lines(letters)
    if not letters:
        print("no dead letters")
    now = time.time()
    for d in letters:
        error = d.error if args.full else (d.error.strip().splitlines() or [""])[-1]
        print(f"{d.job_id}  {d.name}  tries={d.tries}  {_age(now - d.at_ms / 1000)} ago  entry={d.entry_id}")
        print(f"    payload: {d.payload}")
        print("    " + error.replace("\n", "\n    "))
    return 0


async def _retry(bus: JobBus, args: argparse.Namespace) -> int:
    result = await bus.retry(args.id)
    messages = {
        "queued": f"queued {args.id} again",
        "already-queued": f"{args.id} is already queued; dropped its dead letter",
        "not-found": f"no dead letter with job id or entry id {args.id!r}",
    }
    print(messages[result], file=sys.stdout if result != "not-found" else sys.stderr)
    return 0 if result != "not-found" else 1
