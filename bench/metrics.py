"""``kith bench metrics``: what the /metrics instrumentation costs a turn (gateway/ops/metrics.py).

The same code twice, alternated round by round in one process: ``kith bench turn``'s own run with
the observation calls (stage timing in ``gateway/hookcall.py``, the turn counter in
``Gateway.handle_inbound``, model usage in ``gateway/llm/usage.py``) replaced by no-ops, and as
shipped. Reported per mode: the median over rounds of the turn overhead p50/p99 (inside
``Gateway.handle_inbound``) and the on/off ratios; plus the cost of one stage observation, timed alone
(the figure that does not drown in a shared machine's noise).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import timeit
from collections.abc import Callable
from typing import Any

import gateway.app
import gateway.hookcall
import gateway.llm.usage
from bench.common import machine
from bench.turn import run
from gateway.ops.metrics import observe_stage


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--turns", type=int, default=200, help="turns per client and run")
    parser.add_argument("--rounds", type=int, default=6, help="runs of each mode, alternated")
    parser.add_argument("--core", action="store_true", help="memory stages off (as kith bench turn --core)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


def _instrumented(on: bool, real: tuple[Callable[..., Any], ...]) -> None:
    stage, turn, llm = real if on else (_noop, _noop, _noop)
    gateway.hookcall.observe_stage = stage  # type: ignore[assignment]
    gateway.app.observe_turn = turn  # type: ignore[assignment]
    gateway.llm.usage.observe_llm = llm  # type: ignore[assignment]


async def compare(clients: int, turns: int, rounds: int, core: bool) -> dict[str, Any]:
    real = (gateway.hookcall.observe_stage, gateway.app.observe_turn, gateway.llm.usage.observe_llm)
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    try:
        for i in range(rounds):
            for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
                _instrumented(mode == "on", real)
                r = await run(clients, turns, core=core)
                runs[mode].append({"p50_ms": r["overhead_p50_ms"], "p99_ms": r["overhead_p99_ms"]})
    finally:
        _instrumented(True, real)
    keys = ("p50_ms", "p99_ms")
    out: dict[str, Any] = {"bench": "metrics", "clients": clients, "turns_per_client": turns, "rounds": rounds,
                           "stages": "core" if core else "all"}
    for mode, rs in runs.items():
        out[mode] = {k: round(statistics.median(x[k] for x in rs), 3) for k in keys} | {"runs": rs}
    out["ratio_on_off"] = {k: round(out["on"][k] / out["off"][k], 3) if out["off"][k] else None for k in keys}
    n = 200_000
    out["observe_stage_us"] = round(min(timeit.repeat(lambda: observe_stage("gateway_bench", "bench", 0.001),
                                                       number=n, repeat=5)) / n * 1e6, 3)
    out["machine"] = machine()
    return out


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(compare(args.clients, args.turns, args.rounds, args.core))
    if not args.json:
        for mode in ("off", "on"):
            print(json.dumps({"mode": mode, **result[mode]}))
    print(json.dumps({k: v for k, v in result.items() if k not in ("off", "on")} | {
        "off": {k: v for k, v in result["off"].items() if k != "runs"},
        "on": {k: v for k, v in result["on"].items() if k != "runs"}}))
    return 0
