"""``kith bench NAME``: benchmarks live in ``bench/``; each prints JSON, the last line a summary."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

# name -> module; each module exposes ``configure(parser)`` and ``main(args) -> int``.
BENCHMARKS: dict[str, str] = {
    "turn": "bench.turn",
    "locomo": "bench.locomo",
    "recall-scale": "bench.recall_scale",
    "bus": "bench.bus",
    "sleep": "bench.sleep",
    "schedule": "bench.schedule",
    "footprint": "bench.footprint",
    "metrics": "bench.metrics",
    "cluster": "bench.cluster",
    "filter-tier": "bench.filter_tier",
    "web": "bench.web",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("bench", help="run a benchmark (prints JSON)")
    bsub = parser.add_subparsers(dest="bench", metavar="BENCH")
    for name, module in BENCHMARKS.items():
        p = bsub.add_parser(name, help=f"benchmark: {name}")
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            # One broken benchmark must not take the whole CLI down with it.
            p.set_defaults(func=_unavailable(name, exc))
            continue
        mod.configure(p)
        p.set_defaults(func=mod.main)


def _unavailable(name: str, exc: ImportError) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        print(f"benchmark {name!r} is unavailable: {exc}", file=sys.stderr)
        return 2

    return run
