"""``kith bench cluster``: what a turn costs when the node is part of a cluster.

The same gateway is run with ``cluster.enabled`` off and on, alternately (``--rounds``), against one
redis-server started for the bench (``bus.url``, so both runs use the same external Redis and differ
only in the cluster): per run, the turn overhead p50/p99 outside the (echo) model as ``kith bench
turn`` measures it (``gateway.handle_inbound``), from ``--clients`` WebSocket clients. Clustered, a
turn takes the person's Redis lock (``SET NX PX`` + a token-checked release, plus a renewal for holds
over a third of ``cluster.lock_ttl_s``) and each session-log batch a cross-node file lock.
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
from bench.turn import MEMORY_STAGES, PEOPLE, _client
from gateway.app import Gateway
from gateway.bus.server import EmbeddedRedis
from gateway.configread import parse_config

_OPEN = 1_000_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--turns", type=int, default=20, help="turns per client and run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each mode")
    parser.add_argument("--all-stages", action="store_true", help="every memory stage on (default: core stages)")
    parser.set_defaults(func=main)


async def _run(tmp: Path, redis_url: str, clustered: bool, clients: int, turns: int, core: bool) -> dict[str, Any]:
    data = tmp / f"data-{time.monotonic_ns()}"
    cfg = parse_config({
        "data_dir": str(data), "llm": {"provider": "echo"}, "log_level": "WARNING",
        "server": {"port": 0, "rate_limit": {
            "messages_per_minute": _OPEN, "burst": _OPEN, "global_messages_per_minute": _OPEN, "global_burst": _OPEN,
            "new_users_per_minute": _OPEN, "new_users_burst": _OPEN, "global_new_users_per_minute": _OPEN,
            "global_new_users_burst": _OPEN, "max_concurrent_turns": _OPEN}, **PEOPLE},
        "bus": {"url": redis_url, "prefix": f"b{time.monotonic_ns()}"},
        "cluster": {"enabled": clustered, "node_id": "bench"},
        "plugins": {"entry_points": False, "deny": MEMORY_STAGES if core else []},
    }, env={})
    async with Gateway(cfg, entry_points=False) as gw:
        overheads: list[float] = []
        inner = gw.handle_inbound

        async def timed(message: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await inner(message, **kw)
            finally:
                overheads.append((time.perf_counter() - t0) * 1000)

        gw.handle_inbound = timed  # type: ignore[method-assign]
        assert gw.port is not None
        rtts: list[float] = []
        await asyncio.gather(*(_client(gw.port, i, 1, []) for i in range(clients)))  # users, sessions
        overheads.clear()
        t0 = time.perf_counter()
        await asyncio.gather(*(_client(gw.port, i, turns, rtts) for i in range(clients)))
        wall = time.perf_counter() - t0
    return {"p50": percentile(overheads, 0.5), "p99": percentile(overheads, 0.99), "turns_per_s": len(rtts) / wall}


async def run(clients: int, turns: int, rounds: int, core: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kith-bench-cluster-") as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis-home")
        await server.start()
        runs: dict[str, list[dict[str, Any]]] = {"single": [], "clustered": []}
        try:
            for _ in range(rounds):
                for mode in ("single", "clustered"):
                    runs[mode].append(await _run(Path(tmp), server.url, mode == "clustered", clients, turns, core))
        finally:
            await server.stop()
    out: dict[str, Any] = {"bench": "cluster", "clients": clients, "turns_per_client": turns, "rounds": rounds,
                           "stages": "core" if core else "all"}
    for mode, rs in runs.items():
        out[mode] = {
            "overhead_p50_ms": round(statistics.median(r["p50"] for r in rs), 3),
            "overhead_p99_ms": round(statistics.median(r["p99"] for r in rs), 3),
            "turns_per_s": round(statistics.median(r["turns_per_s"] for r in rs), 1),
            "runs_p50_ms": [round(r["p50"], 3) for r in rs],
        }
    out["added_p50_ms"] = round(out["clustered"]["overhead_p50_ms"] - out["single"]["overhead_p50_ms"], 3)
    out["machine"] = machine()
    return out


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(run(args.clients, args.turns, args.rounds, not args.all_stages))
    print(json.dumps(result))
    return 0
