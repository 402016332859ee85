"""``kith bench NAME``: benchmarks live in ``bench/``; each prints JSON, the last line a summary."""

from __future__ import annotations

import argparse
import importlib

# name -> module; each module exposes ``configure(parser)`` and ``main(args) -> int``.
BENCHMARKS: dict[str, str] = {
    "turn": "bench.turn",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("bench", help="run a benchmark (prints JSON)")
    bsub = parser.add_subparsers(dest="bench", metavar="BENCH")
    for name, module in BENCHMARKS.items():
        p = bsub.add_parser(name, help=f"benchmark: {name}")
        mod = importlib.import_module(module)
        mod.configure(p)
        p.set_defaults(func=mod.main)
