"""``kith bench footprint``: start-up time, memory (RSS) and disk of a real ``kith run`` process.

Everything is measured on a spawned daemon (``kith run`` with a temporary config and data dir, the
echo model, the memory stages on or denied), over the WebSocket gateway, as a person would meet it:

* ``startup``: spawn to the first reply on a fresh data dir (connect retried every 10 ms), median of
  ``--starts`` runs; ``python -c pass`` in the same run is the floor no start-up goes under.
* ``cli``: ``kith --help`` and ``kith check-config`` (commands that open no index), median of 3.
* ``rss``: VmRSS (and VmHWM, the peak) after ``--turns`` turns in one conversation, every stage on
  and with the memory stages denied (``core``), plus the growth per 1k turns over the second half.
* ``disk``: bytes allocated under the data dir after start and after the turns (the start-up
  reserve file, a deliberate ``memory.reserve_mb`` preallocation, is reported on its own).
* ``embedder``: RSS of a bare process before and after loading the MiniLM embedder and embedding.
* ``--soak N``: one daemon, every stage on, N turns; RSS and disk sampled every ``--every`` turns,
  and the RSS growth per 1k turns in the first and the last quarter (levelling off = the last is ~0).

Before/after in one run: ``--against DIR`` measures a baseline source tree (``git archive <commit> |
tar -x -C DIR``) part by part just before this one, and reports ``ratio_to_baseline``; ``--tree DIR``
measures another tree instead of the installed one (spawned processes get it on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from bench.common import machine
from gateway.turn.spool import SPOOL_FILE
from gateway.util.diskspace import RESERVE_FILE

MEMORY_STAGES = [
    "plugins.memory_index", "plugins.recall", "plugins.profile", "plugins.people", "plugins.compaction",
    "plugins.memory_writer", "plugins.sleep_cycle", "plugins.distill", "plugins.retention", "plugins.known_facts",
    "plugins.tools",
]
MB = 1024 * 1024


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--turns", type=int, default=400, help="turns in one conversation before RSS is read")
    parser.add_argument("--starts", type=int, default=3, help="start-ups measured (median reported)")
    parser.add_argument("--soak", type=int, default=0, help="soak mode: this many turns, RSS sampled along the way")
    parser.add_argument("--every", type=int, default=500, help="soak: sample RSS and disk every this many turns")
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out: startup,cli,rss,embedder")
    parser.add_argument("--against", default="",
                        help="a baseline source tree (e.g. `git archive` of an older commit): every part runs on it"
                             " too, back to back in the same run, and ratios this/baseline are reported")
    parser.add_argument("--tree", default="", help="measure this source tree instead of the installed kith")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    parser.set_defaults(func=main)


# ------------------------------------------------------------------------------------ the daemon

_TREE: list[str] = []  # the source tree spawned processes import kith from ("" = this one)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KITH_")}
    env["PYTHONUNBUFFERED"] = "1"
    if _TREE and _TREE[-1]:
        # Ahead of the installed (editable) kith: sys.path is searched before the editable finder.
        env["PYTHONPATH"] = _TREE[-1]
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp: Path, port: int, *, core: bool) -> Path:
    lift = 1_000_000
    limits = {k: lift for k in (
        "messages_per_minute", "burst", "global_messages_per_minute", "global_burst", "new_users_per_minute",
        "new_users_burst", "global_new_users_per_minute", "global_new_users_burst", "max_concurrent_turns")}
    cfg = {
        "data_dir": str(tmp / "data"), "llm": {"provider": "echo"}, "log_level": "WARNING",
        "server": {"host": "127.0.0.1", "port": port, "rate_limit": limits},
        "plugins": {"entry_points": False, "deny": MEMORY_STAGES if core else []},
    }
    path = tmp / "config.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


class Daemon:
    def __init__(self, tmp: Path, *, core: bool) -> None:
        self.tmp = tmp
        self.port = _free_port()
        self.config = _config(tmp, self.port, core=core)
        self.data = tmp / "data"
        self.proc: asyncio.subprocess.Process | None = None
        self.started = 0.0

    async def start(self) -> None:
        env = _env()
        self.started = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.cli.main", "-c", str(self.config), "run",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env, cwd=str(self.tmp),
        )

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()

    async def failure(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)
        err = await self.proc.stderr.read()
        return err.decode(errors="replace")[-2000:]

    def rss(self) -> dict[str, float]:
        assert self.proc is not None
        out: dict[str, float] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = round(int(rest.split()[0]) / 1024, 1)
        # RssFile: pages of mapped files (shared libraries, the index's memory-mapped segments),
        # which the kernel can drop under pressure; RssAnon: the heap and other private memory.
        return {"rss_mb": out.get("VmRSS", 0.0), "peak_rss_mb": out.get("VmHWM", 0.0),
                "anon_mb": out.get("RssAnon", 0.0), "file_mb": out.get("RssFile", 0.0)}

    def disk(self) -> dict[str, float]:
        return disk_usage(self.data)


def disk_usage(root: Path) -> dict[str, float]:
    """Allocated bytes (st_blocks: preallocated and memory-mapped files count, holes do not) and
    apparent sizes under ``root``; the start-up reserve and the turn spool, preallocated on purpose, on
    their own."""
    allocated = apparent = reserve = spool = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            if name == RESERVE_FILE and dirpath == str(root):
                reserve += st.st_blocks * 512
                continue
            if name == SPOOL_FILE and dirpath == str(root):
                spool += st.st_blocks * 512
                continue
            allocated += st.st_blocks * 512
            apparent += st.st_size
    return {"allocated_mb": round(allocated / MB, 2), "apparent_mb": round(apparent / MB, 2),
            "reserve_mb": round(reserve / MB, 2), "spool_mb": round(spool / MB, 2)}


class Conversation:
    """One WebSocket client talking to the daemon, one message after another."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    async def connect(self, deadline: float) -> None:
        self._http = aiohttp.ClientSession()
        while True:
            try:
                self._ws = await self._http.ws_connect(f"http://127.0.0.1:{self.port}/ws")
                break
            except aiohttp.ClientConnectionError:
                if time.perf_counter() > deadline:
                    raise
                await asyncio.sleep(0.01)
        await self._ws.send_json({"type": "hello", "client_id": f"footprint-{uuid.uuid4().hex[:8]}"})
        await self._frame(("ready", "error"), any_frame=True)

    async def _frame(self, kinds: tuple[str, ...], *, any_frame: bool = False) -> dict[str, Any]:
        assert self._ws is not None
        while True:
            frame = await self._ws.receive_json()
            if frame.get("type") == "state":  # presence frames, not replies
                continue
            if any_frame or frame.get("type") in kinds:
                return dict(frame)

    async def say(self, text: str) -> dict[str, Any]:
        assert self._ws is not None
        await self._ws.send_json({"type": "message", "id": uuid.uuid4().hex[:8], "text": text})
        frame = await self._frame(("reply", "error"))
        if frame["type"] == "error":
            raise RuntimeError(f"the daemon answered an error: {frame}")
        return frame

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._http is not None:
            await self._http.close()


@contextlib.asynccontextmanager
async def daemon(*, core: bool) -> AsyncIterator[tuple[Daemon, Conversation, float]]:
    """A started daemon, a connected conversation, and the seconds from spawn to its first reply."""
    with tempfile.TemporaryDirectory(prefix="kith-footprint-") as tmp:
        d = Daemon(Path(tmp), core=core)
        await d.start()
        conv = Conversation(d.port)
        try:
            try:
                await conv.connect(time.perf_counter() + 60)
                await conv.say("hello there")
            except Exception as exc:
                raise RuntimeError(f"kith run did not answer: {exc}\n{await d.failure()}") from exc
            first = time.perf_counter() - d.started
            yield d, conv, first
        finally:
            await conv.close()
            await d.stop()


# -------------------------------------------------------------------------------------- parts

def _timed(cmd: list[str], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=_env(), cwd="/")
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 3)


def cli_times() -> dict[str, float]:
    kith = [sys.executable, "-m", "gateway.cli.main"]
    with tempfile.TemporaryDirectory(prefix="kith-footprint-") as tmp:
        cfg = _config(Path(tmp), 8765, core=False)
        return {
            "python_floor_s": _timed([sys.executable, "-c", "pass"]),
            "help_s": _timed([*kith, "--help"]),
            "check_config_s": _timed([*kith, "-c", str(cfg), "check-config"]),
        }


async def startups(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("all", "core"):
        times = []
        for _ in range(n):
            async with daemon(core=mode == "core") as (_d, _c, first):
                times.append(first)
        out[f"first_reply_{mode}_s"] = round(statistics.median(times), 3)
        out[f"first_reply_{mode}_runs_s"] = [round(t, 3) for t in times]
    return out


async def rss_after(turns: int, *, core: bool) -> dict[str, Any]:
    async with daemon(core=core) as (d, conv, _first):
        at_start = {**d.rss(), **{f"disk_{k}": v for k, v in d.disk().items()}}
        half = turns // 2
        for i in range(half):
            await conv.say(f"turn {i}: a note about the garden and the week ahead")
        mid_rss, mid_disk = d.rss()["rss_mb"], d.disk()["allocated_mb"]
        for i in range(half, turns):
            await conv.say(f"turn {i}: a note about the garden and the week ahead")
        end = d.rss()
        end_disk = d.disk()
        per_k = 1000 / max(turns - half, 1)
        return {
            "turns": turns, "at_start": at_start, "rss_mb": end["rss_mb"], "peak_rss_mb": end["peak_rss_mb"],
            "anon_mb": end["anon_mb"], "file_mb": end["file_mb"],
            "disk_allocated_mb": end_disk["allocated_mb"], "disk_apparent_mb": end_disk["apparent_mb"],
            "rss_growth_mb_per_1k_turns": round((end["rss_mb"] - mid_rss) * per_k, 2),
            "disk_growth_mb_per_1k_turns": round((end_disk["allocated_mb"] - mid_disk) * per_k, 2),
        }


async def soak(turns: int, every: int) -> dict[str, Any]:
    samples: list[dict[str, float]] = []
    async with daemon(core=False) as (d, conv, _first):
        t0 = time.perf_counter()
        for i in range(1, turns + 1):
            await conv.say(f"turn {i}: a note about the garden and the week ahead")
            if i % every == 0 or i == turns:
                samples.append({"turn": i, **d.rss(), "disk_mb": d.disk()["allocated_mb"],
                                "elapsed_s": round(time.perf_counter() - t0, 1)})

    def slope(a: dict[str, float], b: dict[str, float], key: str = "rss_mb") -> float:
        return round((b[key] - a[key]) * 1000 / max(b["turn"] - a["turn"], 1), 2)

    q = max(len(samples) // 4, 1)
    first, last = (samples[0], samples[min(q, len(samples) - 1)]), (samples[max(len(samples) - 1 - q, 0)], samples[-1])
    return {
        "turns": turns, "samples": samples,
        "rss_growth_mb_per_1k_first_quarter": slope(*first),
        "rss_growth_mb_per_1k_last_quarter": slope(*last),
        # The heap (anon) should level off; mapped index files (file) grow with the data on disk.
        "anon_growth_mb_per_1k_last_quarter": slope(*last, key="anon_mb"),
        "file_growth_mb_per_1k_last_quarter": slope(*last, key="file_mb"),
        "disk_mb_per_1k_turns": round((samples[-1]["disk_mb"] - samples[0]["disk_mb"]) * 1000
                                      / max(samples[-1]["turn"] - samples[0]["turn"], 1), 2),
    }


_EMBEDDER_PROBE = """
import json, resource, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS'):
            return int(line.split()[1]) / 1024
out = {'bare_mb': rss()}
import numpy, onnxruntime, tokenizers
out['imports_mb'] = rss()
from gateway.memory.search.embed import load_embedder
e = load_embedder('minilm-l6-int8')
out['loaded_mb'] = rss()
texts = ['turn %d: a note about the garden and the week ahead, and what Sam said about Lisbon' % i for i in range(200)]
e.embed_documents(texts)
e.embed_query('what did Sam say about Lisbon?')
out['after_embedding_mb'] = rss()
out['peak_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({k: round(v, 1) for k, v in out.items()}))
"""


def embedder_rss() -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-c", _EMBEDDER_PROBE], capture_output=True, text=True, check=False,
                         env=_env(), cwd="/")
    if res.returncode != 0:
        return {"error": res.stderr[-500:]}
    data: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    data["model_share_mb"] = round(data["after_embedding_mb"] - data["imports_mb"], 1)
    return data


PARTS = ("cli", "startup", "rss", "embedder")


async def measure_part(part: str, args: argparse.Namespace) -> dict[str, Any]:
    if part == "cli":
        return {"cli": cli_times()}
    if part == "startup":
        return {"startup": await startups(args.starts)}
    if part == "rss":
        return {"all_stages": await rss_after(args.turns, core=False), "core": await rss_after(args.turns, core=True)}
    return {"embedder": embedder_rss()}


@contextlib.contextmanager
def source_tree(path: str) -> Iterator[None]:
    _TREE.append(path)
    try:
        yield
    finally:
        _TREE.pop()


def _ratios(new: Any, old: Any) -> Any:
    """``new / old`` for every number both results hold at the same place."""
    if isinstance(new, dict) and isinstance(old, dict):
        out = {k: _ratios(new[k], old[k]) for k in new if k in old and k != "machine"}
        return {k: v for k, v in out.items() if v is not None and v != {}}
    if isinstance(new, (int, float)) and isinstance(old, (int, float)) and not isinstance(new, bool) and old:
        return round(new / old, 3)
    return None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every part on this tree and, with ``--against``, on the baseline tree just before it: part by
    part, so both meet the same load on a shared machine."""
    if args.soak:
        with source_tree(args.tree):
            return {"bench": "footprint-soak", **await soak(args.soak, args.every), "machine": machine()}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    current: dict[str, Any] = {"bench": "footprint"}
    baseline: dict[str, Any] = {}
    for part in PARTS:
        if part in skip:
            continue
        if args.against:
            with source_tree(args.against):
                baseline.update(await measure_part(part, args))
        with source_tree(args.tree):
            current.update(await measure_part(part, args))
    if "cli" in current and "startup" in current:
        current["startup"]["python_floor_s"] = current["cli"]["python_floor_s"]
    current["machine"] = machine()
    if not args.against:
        return current
    return {**current, "baseline_tree": args.against, "baseline": baseline,
            "ratio_to_baseline": _ratios(current, baseline)}


def main(args: argparse.Namespace) -> int:
    args.against = str(Path(args.against).resolve()) if args.against else ""
    args.tree = str(Path(args.tree).resolve()) if args.tree else ""
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
