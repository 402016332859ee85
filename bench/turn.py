"""``kith bench turn``: turns/s and per-turn overhead through the real WebSocket gateway.

C clients connect over WebSocket and each sends N messages one after another; the echo provider
answers instantly, so what is measured is kith's own overhead: identity, session, context assembly,
SQLite transcript, session log and the WebSocket round trip. ``overhead`` is measured inside
``Gateway.handle_inbound``; ``roundtrip`` is what a client sees (includes queueing under load).

``--memories 0,10000,100000`` measures the memory stages instead: one user with that many memories
in the index (synthetic, see bench/synth.py), a profile, working memory, people notes, facts and a
digest, talks N turns with every built-in stage on (recall, injection, people, facts, compaction,
indexing through the bus). Reported per scale: turn overhead p50/p99 (the echo model answers
instantly, so this is kith's time) and prompt tokens per turn, plus the p99 ratio to the first
scale run in the same process (the machine is shared: ratios are steadier than absolute figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import machine, percentile
from gateway.app import Gateway
from gateway.config import ServerConfig
from gateway.configread import parse_config
from gateway.hookspecs import hookimpl


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20, help="turns per client")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    parser.add_argument("--core", action="store_true",
                        help="gateway core only: the memory stages switched off (plugins.deny), as issue 2 measured")
    parser.add_argument("--first-prompt", action="store_true",
                        help="the prompt tokens of a person's first turn with search, calendar and mail connected "
                             "(bench/first_prompt.py)")
    parser.add_argument("--memories", default="", help="memory-stage mode: comma-separated scales, e.g. 0,10000,100000")
    parser.add_argument("--provider", default="echo",
                        help="echo (no model), or anthropic / openai against an in-process fake server that answers "
                             "instantly; 'openai,anthropic' runs both alternately and reports the overhead ratio")
    parser.add_argument("--rounds", type=int, default=2, help="with several providers: alternating runs of each")
    parser.add_argument("--against", default="",
                        help="a baseline source tree (git archive <commit> | tar -x -C DIR): this run's bench "
                             "code against that tree's gateway and this one's, alternately, --rounds times each")
    parser.add_argument("--state-url", default="",
                        help="state backend: sqlite (default) or a postgresql:// server URL (a scratch database is "
                             "made there and dropped); 'sqlite,postgresql://...' alternates them (--rounds)")
    parser.add_argument("--channel", default="",
                        help="'telegram': what streaming by edits costs per turn, streaming off, model deltas only "
                             "and on, alternately (--turns per run, --rounds; bench/turn_stream.py)")
    parser.add_argument("--stream-interval-s", type=float, default=1.0, help="with --channel: the edit interval")
    parser.add_argument("--chunk-ms", type=float, default=50.0,
                        help="with --channel: the model fake's pause between 8-character pieces")
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


# Each client is a person of its own, not the one local owner (docs/web.md#one-owner); a baseline tree
# from before the owner (--against) has no such key and needs none.
PEOPLE: dict[str, Any] = {"local_owner": False} if "local_owner" in ServerConfig.model_fields else {}

MEMORY_STAGES = [
    "plugins.memory_index", "plugins.recall", "plugins.profile", "plugins.people", "plugins.compaction",
    "plugins.memory_writer", "plugins.sleep_cycle", "plugins.distill", "plugins.retention", "plugins.known_facts",
    "plugins.tools",
]


@asynccontextmanager
async def _model_server(provider: str) -> AsyncIterator[tuple[dict[str, Any], list[Any]]]:
    """The ``llm`` settings for ``provider``; anthropic and openai talk to the test suite's fakes of
    their APIs (tests/fakes/), over loopback HTTP with streaming, through the real SDKs. The list
    fills with the requests the model server received (empty for echo)."""
    if provider == "echo":
        yield {"provider": "echo"}, []
        return
    if provider == "anthropic":
        from tests.fakes.anthropic import API_KEY, FakeAnthropic

        fake = await FakeAnthropic().start()
        try:
            llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
            yield llm, fake.requests
        finally:
            await fake.stop()
        return
    if provider == "openai":
        from tests.fakes.openai_server import API_KEY as OPENAI_KEY
        from tests.fakes.openai_server import FakeOpenAI

        async with FakeOpenAI() as server:
            yield {"provider": "openai", "api_key": OPENAI_KEY, "base_url": server.url, "model": "fake-gpt",
                   "max_retries": 0}, server.requests
        return
    raise SystemExit(f"unknown provider {provider!r} (echo, anthropic, openai)")


async def run(clients: int, turns: int, core: bool = False, provider: str = "echo",
              state_url: str | None = None) -> dict[str, Any]:  # fmt: skip
    async with _model_server(provider) as (llm, requests):
        if state_url:  # PostgreSQL: a scratch database on that server, dropped afterwards
            from gateway.state.postgres.scratch import scratch_database

            with scratch_database(state_url, prefix="kith_bench_") as url:
                result = await _run(clients, turns, core, llm, url)
        else:
            result = await _run(clients, turns, core, llm)
        return {**result, "provider": provider, "model_requests": len(requests),
                "state": "postgresql" if state_url else "sqlite"}  # fmt: skip


async def run_states(clients: int, turns: int, core: bool, urls: list[str], rounds: int) -> dict[str, Any]:
    """State backends alternately, ``rounds`` times each (back to back on one machine); per backend the
    median p50/p99 overhead and turns/s, and each one's p50 ratio to the first named."""
    names = ["postgresql" if u.startswith("postgres") else "sqlite" for u in urls]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for _ in range(rounds):
        for name, url in zip(names, urls, strict=True):
            runs[name].append(await run(clients, turns, core, "echo", url if name == "postgresql" else None))
    out: dict[str, Any] = {"bench": "turn-state", "clients": clients, "turns_per_client": turns,
                           "stages": "core" if core else "all", "rounds": rounds, "backends": {}}  # fmt: skip
    for name, rs in runs.items():
        out["backends"][name] = {key: round(statistics.median(r[key] for r in rs), 3) for key in
                                 ("overhead_p50_ms", "overhead_p99_ms", "roundtrip_p50_ms", "roundtrip_p99_ms",
                                  "turns_per_s")}  # fmt: skip
        out["backends"][name]["runs_p50_ms"] = [r["overhead_p50_ms"] for r in rs]
    base = out["backends"][names[0]]["overhead_p50_ms"] or 1.0
    for name in names:
        out["backends"][name]["p50_ratio_to_" + names[0]] = round(out["backends"][name]["overhead_p50_ms"] / base, 3)
    out["machine"] = machine()
    return out


async def run_compare(clients: int, turns: int, core: bool, providers: list[str], rounds: int) -> dict[str, Any]:
    """Providers alternately, ``rounds`` times each (the machine is shared: alternation spreads drift
    over all of them); per provider the median of its runs' p50 and p99 overhead, and each one's
    p50 ratio to the last provider named."""
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in providers}
    for _ in range(rounds):
        for p in providers:
            runs[p].append(await run(clients, turns, core, p))
    out: dict[str, Any] = {"bench": "turn-providers", "clients": clients, "turns_per_client": turns,
                           "stages": "core" if core else "all", "rounds": rounds, "providers": {}}
    for p, rs in runs.items():
        out["providers"][p] = {
            "overhead_p50_ms": round(statistics.median(r["overhead_p50_ms"] for r in rs), 3),
            "overhead_p99_ms": round(statistics.median(r["overhead_p99_ms"] for r in rs), 3),
            "turns_per_s": round(statistics.median(r["turns_per_s"] for r in rs), 1),
            "runs_p50_ms": [r["overhead_p50_ms"] for r in rs],
            "model_requests": sum(r["model_requests"] for r in rs),
        }
    base = out["providers"][providers[-1]]["overhead_p50_ms"] or 1.0
    for p in providers:
        out["providers"][p]["p50_ratio_to_" + providers[-1]] = round(out["providers"][p]["overhead_p50_ms"] / base, 3)
    out["machine"] = machine()
    return out


async def _run(clients: int, turns: int, core: bool, llm: dict[str, Any], state_url: str | None = None,
               ) -> dict[str, Any]:  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="kith-bench-") as tmp:
        cfg = parse_config({
            "data_dir": str(Path(tmp) / "data"), "llm": llm,
            # The bench is one address creating many users and sending as fast as it can: lift the limits.
            "server": {"port": 0, "rate_limit": {
                "messages_per_minute": 1_000_000, "burst": 1_000_000, "global_messages_per_minute": 1_000_000,
                "global_burst": 1_000_000, "new_users_per_minute": 1_000_000, "new_users_burst": 1_000_000,
                "global_new_users_per_minute": 1_000_000, "global_new_users_burst": 1_000_000,
                "max_concurrent_turns": 1_000_000}, **PEOPLE},
            "plugins": {"entry_points": False, "deny": MEMORY_STAGES if core else []}, "log_level": "WARNING",
            **({"state": {"url": state_url}} if state_url else {}),
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
            # Indexing runs behind the turns at a lower priority: what it still had to do when the
            # last reply went out is timed apart, so the figures say what the turns cost and what
            # keeping the index up to date adds.
            t1 = time.perf_counter()
            await gw.settle(timeout=600)
            settle = time.perf_counter() - t1
            # stats(), not the counters themselves: the same bench code runs against older trees (--against).
            counters = gw.memory.stats() if gw.memory is not None else {}
    n = len(rtts)
    return {
        "bench": "turn", "stages": "core" if core else "all", "clients": clients, "turns": n, "wall_s": round(wall, 3),
        "turns_per_s": round(n / wall, 1),
        "settle_s": round(settle, 3), "turns_per_s_indexed": round(n / (wall + settle), 1),
        "embedded_chunks": counters.get("embedded_chunks", 0), "recalls": counters.get("recalls", 0),
        "overhead_p50_ms": round(percentile(overheads, 0.5), 3),
        "overhead_p99_ms": round(percentile(overheads, 0.99), 3),
        "roundtrip_p50_ms": round(percentile(rtts, 0.5), 3),
        "roundtrip_p99_ms": round(percentile(rtts, 0.99), 3),
        "machine": machine(),
    }


PROFILE = "# Sam\n\n## Basics\n" + "".join(
    f"- Sam {fact}.\n" for fact in (
        "lives in Leeds with a cat called Pixel", "works as a nurse on night shifts", "is learning Portuguese",
        "prefers short answers in the morning", "is vegetarian", "plays five-a-side football on Thursdays",
        "has a sister, Priya, in Toronto", "is saving for a trip to Lisbon", "drives an old blue Fiat",
    )) + "\n## Projects\n" + "".join(f"- Project {i}: restoring piece {i} of the garden shed.\n" for i in range(30))


def _seed_files(gw: Gateway) -> None:
    from gateway.memory.files import working

    store = gw.memory_store("measured")
    store.write("USER.md", PROFILE, source="bench")
    store.write("PATTERNS.md", "# Patterns\n- Writes late in the evening.\n- Plans trips months ahead.\n",
                source="bench")
    working.write(store, "## Working on\n- Booking the Lisbon trip; comparing flights.\n", now=datetime.now(UTC),
                  ttl_days=14, source="bench")
    store.write("MEMORY_SHORT.md", "# Recent days\n" + "Sam planned the trip and fixed the kitchen tap. " * 40,
                source="bench")
    for name in ("Priya", "Tom", "Alice"):
        store.write(f"people/websocket-{name.lower()}.md", f"# {name}\n- {name} is a friend of Sam.\n", source="bench")
    aliases = {n.lower(): f"websocket-{n.lower()}" for n in ("Priya", "Tom", "Alice")}
    store.write("people/_aliases.json", json.dumps(aliases), source="bench")
    assert gw.kg is not None
    for i in range(50):
        gw.kg.add("measured", "Sam", "likes", f"hobby number {i}")


class _Prompt:
    """Counts the prompt tokens of each model call (system sections + messages)."""

    def __init__(self) -> None:
        self.tokens: list[int] = []

    @hookimpl
    def gateway_before_llm_call(self, request: Any) -> None:
        from gateway.turn.budget import estimate_tokens, render_section

        self.tokens.append(sum(estimate_tokens(render_section(s)) for s in request.system)
                           + sum(estimate_tokens(m.content) for m in request.messages))


async def run_memory_scale(memories: int, turns: int) -> dict[str, Any]:
    import random

    from bench.synth import fill, sentence
    from gateway.types import InboundMessage

    prompt = _Prompt()
    with tempfile.TemporaryDirectory(prefix="kith-bench-") as tmp:
        cfg = parse_config({
            "data_dir": str(Path(tmp) / "data"), "llm": {"provider": "echo"}, "server": {"port": 0},
            "plugins": {"entry_points": False}, "log_level": "WARNING",
            "identity_links": [{"user": "measured", "accounts": ["websocket:sam"]}],
        }, env={})
        async with Gateway(cfg, plugins=(prompt,), entry_points=False, serve_http=False) as gw:
            assert gw.memory is not None
            await gw.handle_inbound(InboundMessage(channel="websocket", account_id="sam", text="hi", trusted=True))
            _seed_files(gw)
            t0 = time.perf_counter()
            # An older tree (--against) has the index and the embedder on the service itself.
            loader = getattr(gw.memory, "loader", gw.memory)
            await asyncio.to_thread(fill, loader.index, loader.embedder, loader.sparse, "user:measured", memories)
            await asyncio.to_thread(loader.index.optimize)
            load_s = time.perf_counter() - t0
            await gw.settle(timeout=600)
            rng = random.Random(11)
            overheads: list[float] = []
            prompt.tokens.clear()
            for i in range(turns + 5):
                text = f"Do you remember when {sentence(rng)}? And how is Priya?"
                message = InboundMessage(channel="websocket", account_id="sam", text=text, trusted=True,
                                         message_id=f"m{i}", display_name="Sam")
                t = time.perf_counter()
                await gw.handle_inbound(message)
                if i >= 5:  # the first turns warm caches and take the session-start snapshot
                    overheads.append((time.perf_counter() - t) * 1000)
            await gw.settle(timeout=600)
            # Transcript rows that compaction has folded into working memory by the end of the run.
            # (The run is one session: Sam's, on one channel, with no idle gap.)
            uid = gw.identities.lookup("websocket", "sam")
            session = gw.state.sessions.open_in(f"user:{uid}")
            done = gw.state.compactions.get(session.session_id) if session else None
            compacted = done.upto_seq if done else 0
    tokens = prompt.tokens[5:]
    return {
        "memories": memories, "turns": len(overheads), "load_s": round(load_s, 1),
        "overhead_p50_ms": round(percentile(overheads, 0.5), 2),
        "overhead_p99_ms": round(percentile(overheads, 0.99), 2),
        "prompt_tokens_mean": round(sum(tokens) / max(1, len(tokens)), 1),
        "prompt_tokens_max": max(tokens, default=0),
        "compacted_rows": compacted,
    }


async def run_stages(scales: list[int], turns: int) -> dict[str, Any]:
    results = [await run_memory_scale(n, turns) for n in scales]
    base = results[0]["overhead_p99_ms"] or 1.0
    for r in results:
        r["p99_ratio_to_first"] = round(r["overhead_p99_ms"] / base, 2)
    return {"bench": "turn-memory", "scales": results, "machine": machine()}


_KEYS = ("turns_per_s", "overhead_p50_ms", "overhead_p99_ms", "roundtrip_p99_ms", "settle_s", "turns_per_s_indexed",
         "embedded_chunks")  # fmt: skip


def _run_in(tree: Path, shim: Path, clients: int, turns: int, core: bool) -> dict[str, Any]:
    """One run of this file's ``run`` in a fresh interpreter whose ``gateway`` is ``tree``'s: the bench
    code is the same for both trees, only the gateway differs (``shim`` holds a copy of it, first on
    the path, so the tree's own bench, if any, is not used)."""
    import os
    import subprocess
    import sys

    if not (tree / "gateway" / "app.py").is_file():
        raise SystemExit(f"bench turn: {tree} is not a kith source tree (no gateway/app.py)")
    # The gateway imported must be the tree's, not the installed one: the run reports where it came from.
    code = (f"import asyncio, json, gateway; from bench import turn; "
            f"r = asyncio.run(turn.run({clients}, {turns}, core={core})); "
            f"print(json.dumps({{**r, 'gateway_path': gateway.__file__}}))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), str(tree)])}
    done = subprocess.run([sys.executable, "-c", code], cwd=shim, env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"bench turn in {tree} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(result["gateway_path"]).resolve().is_relative_to(tree):
        raise SystemExit(f"bench turn: ran {result['gateway_path']}, not the gateway of {tree}")
    return result


def run_against(baseline: str, clients: int, turns: int, core: bool, rounds: int) -> dict[str, Any]:
    """Before/after on one machine: the baseline tree and this one, alternately (the machine is shared,
    so both see the same drift), each run in its own process; per tree each run's figures and the
    medians, and after/before ratios of the medians."""
    import os
    import shutil

    here = Path(__file__).resolve().parent
    trees = {"before": Path(baseline).resolve(), "after": here.parent}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="kith-bench-shim-") as tmp:
        shim = Path(tmp)
        (shim / "bench").mkdir()
        for name in ("__init__.py", "common.py", "turn.py"):
            shutil.copy(here / name, shim / "bench" / name)
        for _ in range(rounds):
            for name, tree in trees.items():
                load = os.getloadavg()[0]
                r = _run_in(tree, shim, clients, turns, core)
                runs[name].append({"load_avg_1m": round(load, 2), **{k: r.get(k) for k in _KEYS}})
    medians = {name: {k: statistics.median(r[k] for r in rs if r.get(k) is not None) for k in _KEYS
                      if any(r.get(k) is not None for r in rs)} for name, rs in runs.items()}  # fmt: skip
    ratios = {k: round(medians["after"][k] / medians["before"][k], 3) for k in medians["after"]
              if medians["before"].get(k)}  # fmt: skip
    return {"bench": "turn-against", "clients": clients, "turns_per_client": turns,
            "stages": "core" if core else "all", "rounds": rounds, "baseline_tree": str(trees["before"]),
            "runs": runs, "median": medians, "ratio_after_to_before": ratios, "machine": machine()}  # fmt: skip


def main(args: argparse.Namespace) -> int:
    if args.channel:
        from bench import turn_stream

        if args.channel != "telegram":
            raise SystemExit(f"bench turn --channel: only telegram is measured, not {args.channel!r}")
        streamed = asyncio.run(turn_stream.run(args.turns, args.rounds, args.stream_interval_s, args.chunk_ms,
                                               MEMORY_STAGES))
        if not args.json:
            for mode, r in streamed["modes"].items():
                print(f"{mode:>6}: {r['calls_per_turn']} Bot API calls/turn, "
                      f"CPU {r['cpu_ms_per_turn']} ms/turn, first text {r['first_text_ms']} ms, "
                      f"whole reply {r['whole_reply_ms']} ms (p50)")
        print(json.dumps(streamed))
        return 0
    if args.first_prompt:
        from bench.first_prompt import run_first_prompt

        first = asyncio.run(run_first_prompt())
        first["machine"] = machine()
        if not args.json:
            print(f"first prompt: {first['prompt_tokens']} tokens (system {first['system_tokens']}, message "
                  f"{first['message_tokens']}, {first['tools']} tools {first['tool_tokens']})")
        print(json.dumps(first))
        return 0
    if args.against:
        compared = run_against(args.against, args.clients, args.turns, args.core, args.rounds)
        if not args.json:
            for name, m in compared["median"].items():
                print(f"{name:>7}: {m.get('turns_per_s')} turns/s, overhead p50 {m.get('overhead_p50_ms')} ms, "
                      f"p99 {m.get('overhead_p99_ms')} ms (median of {args.rounds})")
        print(json.dumps(compared))
        return 0
    if args.memories:
        scales = [int(x) for x in args.memories.split(",") if x.strip()]
        staged = asyncio.run(run_stages(scales, args.turns))
        if not args.json:
            for r in staged["scales"]:
                print(f"{r['memories']:>7} memories: overhead p50 {r['overhead_p50_ms']} ms, p99 "
                      f"{r['overhead_p99_ms']} ms, prompt {r['prompt_tokens_mean']} tokens/turn")
        print(json.dumps(staged))
        return 0
    urls = [u.strip() for u in args.state_url.split(",") if u.strip()]
    if len(urls) > 1:
        states = asyncio.run(run_states(args.clients, args.turns, args.core, urls, args.rounds))
        if not args.json:
            for name, r in states["backends"].items():
                print(f"{name:>10}: overhead p50 {r['overhead_p50_ms']} ms, p99 {r['overhead_p99_ms']} ms, "
                      f"{r['turns_per_s']} turns/s")
        print(json.dumps(states))
        return 0
    providers = [p.strip() for p in args.provider.split(",") if p.strip()]
    if len(providers) > 1:
        compared = asyncio.run(run_compare(args.clients, args.turns, args.core, providers, args.rounds))
        if not args.json:
            for name, r in compared["providers"].items():
                print(f"{name:>10}: overhead p50 {r['overhead_p50_ms']} ms, p99 {r['overhead_p99_ms']} ms, "
                      f"{r['turns_per_s']} turns/s")
        print(json.dumps(compared))
        return 0
    state_url = urls[0] if urls and urls[0] != "sqlite" else None
    result = asyncio.run(run(args.clients, args.turns, args.core, providers[0] if providers else "echo", state_url))
    if not args.json:
        print(f"{result['turns']} turns from {result['clients']} clients in {result['wall_s']} s")
    print(json.dumps(result))
    return 0
