"""``kith bench filter-tier``: what the recall filter tier adds to a turn when its model is slow.

Issue 18's goal: with the filter tier configured against a model that answers after 2 s, the turn
still completes within the deadline plus 50 ms. One gateway (echo-free: the main model is the fake
Anthropic server, the ``cheap`` role a fake OpenAI-compatible server, both over loopback through the
real SDKs), a person with a few hundred memories, and turns alternated round by round between three
modes in the same process:

* ``off``: ``memory.filter_tier.enabled: off`` (the hybrid ranking only);
* ``slow``: on, the cheap model answers after ``--delay`` s (default 2): every turn falls back;
* ``fast``: on, the cheap model answers at once with a ``KEEP:`` line.

Reported: turn wall time p50/p99 per mode, and ``slow - off`` (what a hung filter model costs a turn)
against ``deadline_ms + 50``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, percentile
from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.hookspecs import hookimpl
from gateway.memory.search.filter_tier import DECISION
from gateway.services import Services
from gateway.testing import message
from gateway.types import Turn


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--turns", type=int, default=20, help="turns per mode and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--deadline-ms", type=int, default=800)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the slow filter model takes")
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")


class Decisions:
    """Keeps each turn's filter decision (the recall stage stashes it on the turn)."""

    def __init__(self) -> None:
        self.outcomes: list[str] = []
        self.reasons: list[str] = []

    @hookimpl
    def gateway_before_llm_call(self, gateway: Services, turn: Turn, request: Any) -> None:
        decision = turn.stash.get(DECISION)
        self.outcomes.append(decision.outcome if decision else "none")
        if decision is not None and decision.outcome == "error":
            self.reasons.append(decision.reason)


async def bench(turns: int, rounds: int, deadline_ms: int, delay: float, memories: int) -> dict[str, Any]:
    from tests.fakes.anthropic import API_KEY, FakeAnthropic
    from tests.fakes.openai_server import API_KEY as OPENAI_KEY
    from tests.fakes.openai_server import FakeOpenAI

    main = await FakeAnthropic().start()
    cheap = FakeOpenAI()
    await cheap.start()
    data = Path(tempfile.mkdtemp(prefix="kith-bench-filter-"))
    cfg = parse_config({
        "data_dir": str(data), "server": {"port": 0},
        "llm": {"provider": "anthropic", "api_key": API_KEY, "base_url": main.base_url, "max_retries": 0,
                "roles": {"cheap": {"provider": "openai", "base_url": cheap.url, "api_key": OPENAI_KEY,
                                    "model": "fake-mini", "max_retries": 0}}},
        # stand_down_after 0: every slow turn asks the model, so the figure is a missed call's cost.
        "memory": {"filter_tier": {"enabled": "on", "deadline_ms": deadline_ms, "stand_down_after": 0}},
        "background": {"writer": {"enabled": False}, "sleep": {"enabled": False}},
    }, env={})
    times: dict[str, list[float]] = {"off": [], "slow": [], "fast": []}
    outcomes: dict[str, dict[str, int]] = {m: {} for m in times}
    seen = Decisions()
    try:
        async with Gateway(cfg, entry_points=False, plugins=[seen]) as gw:
            await gw.handle_inbound(message("hello", account="bench"))
            uid = gw.identities.lookup("websocket", "bench")
            assert uid is not None
            store = gw.memory_store(uid)
            for i in range(memories):
                store.write(f"topics/t{i}.md", f"# Topic {i}\n\nNote {i} about the garden, boats and tea.\n",
                            source="bench")
            await gw.settle()
            ft = gw.config.memory.filter_tier
            for r in range(rounds):
                for m in ("off", "slow", "fast") if r % 2 == 0 else ("fast", "slow", "off"):
                    ft.enabled = "off" if m == "off" else "on"
                    for t in range(turns):
                        if m != "off":
                            cheap.enqueue("KEEP: 2, 1", delay_s=delay if m == "slow" else 0.0)
                        started = time.perf_counter()
                        await gw.handle_inbound(message(f"what about the garden and tea {r}-{t}?", account="bench"))
                        times[m].append((time.perf_counter() - started) * 1000)
                        outcome = seen.outcomes[-1]
                        outcomes[m][outcome] = outcomes[m].get(outcome, 0) + 1
                    cheap.script.clear()
    finally:
        await main.stop()
        await cheap.close()
    out: dict[str, Any] = {"bench": "filter-tier", "turns_per_mode": turns * rounds, "deadline_ms": deadline_ms,
                           "slow_model_s": delay, "memories": memories, "machine": machine()}
    for m, values in times.items():
        out[m] = {"p50_ms": round(statistics.median(values), 1), "p99_ms": round(percentile(values, 0.99), 1),
                  "max_ms": round(max(values), 1), "decisions": outcomes[m]}
    out["slow_minus_off_p50_ms"] = round(out["slow"]["p50_ms"] - out["off"]["p50_ms"], 1)
    out["slow_minus_off_p99_ms"] = round(out["slow"]["p99_ms"] - out["off"]["p99_ms"], 1)
    out["error_reasons"] = sorted(set(seen.reasons))[:5]
    out["goal_ms"] = deadline_ms + 50
    out["within_goal"] = out["slow_minus_off_p99_ms"] <= deadline_ms + 50
    return out


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(bench(args.turns, args.rounds, args.deadline_ms, args.delay, args.memories))
    print(json.dumps(result, indent=None if args.json else 1))
    return 0

