"""``kith bench turn``: turns/s and per-turn overhead through the real WebSocket gateway.

C clients connect over WebSocket and each sends N messages one after another; the echo provider
answers instantly, so what is measured is kith's own overhead: identity, session, context assembly,
SQLite transcript, session log and the WebSocket round trip. ``overhead`` is measured inside
``Gateway.handle_inbound``; ``roundtrip`` is what a client sees (includes queueing under load).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import machine, percentile
from gateway.app import Gateway
from gateway.config import parse_config


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20, help="turns per client")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    parser.set_defaults(func=main)


async def _client(port: int, idx: int, turns: int, rtts: list[float]) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
        await ws.send_json({"type": "hello", "client_id": f"bench-{idx}"})
        await ws.receive_json()
        for i in range(turns):
            ref = f"{i}-{uuid.uuid4().hex[:6]}"
            t0 = time.perf_counter()
            await ws.send_json({"type": "message", "id": ref, "text": f"message {i} from client {idx}"})
            while True:
                frame = await ws.receive_json()
                if frame["type"] in ("reply", "error"):
                    break
            rtts.append((time.perf_counter() - t0) * 1000)


async def run(clients: int, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kith-bench-") as tmp:
        cfg = parse_config({
            "data_dir": str(Path(tmp) / "data"), "llm": {"provider": "echo"},
            "server": {"port": 0, "rate_limit": {"messages_per_minute": 1_000_000, "burst": 1_000_000}},
            "plugins": {"entry_points": False}, "log_level": "WARNING",
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
            rtts: list[float] = []
            assert gw.port is not None
            # Warm-up: first contact creates users and sessions; measured separately from steady state.
            await asyncio.gather(*(_client(gw.port, i, 1, []) for i in range(clients)))
            overheads.clear()
            t0 = time.perf_counter()
            await asyncio.gather(*(_client(gw.port, i, turns, rtts) for i in range(clients)))
            wall = time.perf_counter() - t0
    n = len(rtts)
    return {
        "bench": "turn", "clients": clients, "turns": n, "wall_s": round(wall, 3),
        "turns_per_s": round(n / wall, 1),
        "overhead_p50_ms": round(percentile(overheads, 0.5), 3),
        "overhead_p99_ms": round(percentile(overheads, 0.99), 3),
        "roundtrip_p50_ms": round(percentile(rtts, 0.5), 3),
        "roundtrip_p99_ms": round(percentile(rtts, 0.99), 3),
        "machine": machine(),
    }


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(run(args.clients, args.turns))
    if not args.json:
        print(f"{result['turns']} turns from {result['clients']} clients in {result['wall_s']} s")
    print(json.dumps(result))
    return 0
