"""``kith bench turn --channel telegram``: what streaming a reply by edits costs per turn.

One person talks to kith on Telegram: the real adapter (python-telegram-bot) against the test suite's
Bot API fake, over loopback; the model is the Anthropic fake streaming a ``REPLY_CHARS``-character
reply through the real SDK (SSE), 8 characters every ``--chunk-ms`` (a model writing at about 160
characters a second by default, so a turn takes a few seconds, as a real one does). Turns are one
after another, each timed from the update being offered to the chat showing the whole reply. Three
modes run alternately (``--rounds``), each in a gateway of its own:

* ``off``: no streaming: the model is asked without streaming (the fake then answers after the time
  its pieces would have taken, as a real model does) and the reply is sent whole;
* ``deltas``: the model streams to kith but nothing is posted before the end (``stream_first_chars``
  past the reply's length): the cost of streaming from the model alone;
* ``on``: streaming by edits. ``on`` minus ``deltas`` is what the edits cost.

Reported per turn:

* ``calls_per_turn``: Bot API sends and edits of the reply (the platform's side of the cost);
* ``cpu_ms_per_turn``: CPU time of the whole process (kith, and the two fakes answering it);
* ``first_text_ms`` and ``whole_reply_ms`` (p50): when the person first sees text, and all of it.

The memory stages are off (``plugins.deny``), as in ``--core``: the figures are about delivery.
"""

from __future__ import annotations

import asyncio
import importlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, percentile
from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.plugins import BUILTIN_PLUGINS

TOKEN = "123456:BENCH-token"
PERSON = 4242
REPLY_CHARS = 600


def _reply() -> str:
    words = " ".join(f"step {i} of the plan;" for i in range(60))
    return ("Sure. " + words)[:REPLY_CHARS].rstrip()


async def _quiet(tg: Any, quiet_s: float = 0.5, timeout: float = 60.0) -> None:
    """Until the chat has an answer and nothing has been sent or edited for ``quiet_s``."""
    deadline = time.monotonic() + timeout
    while not tg.timeline or time.monotonic() - tg.timeline[-1].at < quiet_s:
        if time.monotonic() > deadline:
            raise SystemExit("bench turn --channel: the first turn was not answered")
        await asyncio.sleep(0.02)


async def _shown(tg: Any, count: int, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        shown = tg.shown(PERSON)
        if len(shown) >= count and shown[-1] == text:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"bench turn --channel: the chat shows {shown[-1:]!r}, not the reply")
        await asyncio.sleep(0.005)


async def run_one(mode: str, turns: int, interval_s: float, chunk_ms: float,
                  deny: list[str]) -> dict[str, Any]:  # fmt: skip
    from tests.fakes.anthropic import API_KEY, FakeAnthropic
    from tests.fakes.telegram_api import FakeTelegram

    reply = _reply()
    model = await FakeAnthropic().start()
    if mode == "off":  # asked without streaming: the whole answer after the time its pieces take
        model.default_delay_s = -(-len(reply) // 8) * chunk_ms / 1000
    else:
        model.chunk_delay_s = chunk_ms / 1000
    model.responders.append(lambda _body: reply)
    plugins = tuple(importlib.import_module(n) for n in ("adapters.builtin", "plugins.access")
                    if n not in BUILTIN_PLUGINS)  # fmt: skip
    try:
        async with FakeTelegram(token=TOKEN) as tg:
            with tempfile.TemporaryDirectory(prefix="kith-bench-") as tmp:
                cfg = parse_config({
                    "data_dir": str(Path(tmp) / "data"), "server": {"port": 0}, "log_level": "WARNING",
                    "llm": {"provider": "anthropic", "api_key": API_KEY, "base_url": model.base_url, "max_retries": 0},
                    "plugins": {"entry_points": False, "deny": deny},
                    "channels": {"telegram": {
                        "enabled": True, "token": TOKEN, "base_url": tg.base_url, "poll_timeout_s": 1,
                        "dm_policy": "allowlist", "allow_from": [str(PERSON)], "parse_mode": "plain",
                        "send_rate_per_s": 1000, "send_burst": 1000, "stream": mode != "off",
                        "stream_first_chars": 1000 if mode == "deltas" else 40,
                        "stream_interval_s": interval_s, "stream_drafts": False}},
                }, env={})  # fmt: skip
                async with Gateway(cfg, plugins=plugins, entry_points=False) as gw:
                    await asyncio.wait_for(gw.adapters["telegram"].ready.wait(), 30)  # type: ignore[attr-defined]
                    await tg.push(tg.make_update(user_id=PERSON, text="hello"))  # first contact: user, session
                    await _quiet(tg)  # its reply carries a note (the time zone assumed): not measured
                    calls, cpu, first, whole = [], [], [], []
                    for i in range(turns):
                        before, count = len(tg.timeline), len(tg.shown(PERSON)) + 1
                        c0, t0 = time.process_time(), time.monotonic()
                        await tg.push(tg.make_update(user_id=PERSON, text=f"question {i}"))
                        await _shown(tg, count, reply)
                        whole.append((time.monotonic() - t0) * 1000)
                        cpu.append((time.process_time() - c0) * 1000)
                        mine = [e for e in tg.timeline[before:] if e.chat_id == PERSON]
                        calls.append(len(mine))
                        first.append((mine[0].at - t0) * 1000)
    finally:
        await model.stop()
    return {"mode": mode, "turns": turns, "calls_per_turn": statistics.mean(calls),
            "edits_per_turn": statistics.mean(calls) - 1, "cpu_ms_per_turn": statistics.median(cpu),
            "first_text_ms": percentile(first, 0.5), "whole_reply_ms": percentile(whole, 0.5)}


async def run(turns: int, rounds: int, interval_s: float, chunk_ms: float, deny: list[str]) -> dict[str, Any]:
    """Streaming off and on alternately, ``rounds`` times each (the machine is shared: alternation
    spreads its drift over both); per mode the median of its runs."""
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "deltas": [], "on": []}
    for _ in range(rounds):
        for mode in runs:
            runs[mode].append(await run_one(mode, turns, interval_s, chunk_ms, deny))
    out: dict[str, Any] = {"bench": "turn-stream", "channel": "telegram", "turns_per_run": turns, "rounds": rounds,
                           "stream_interval_s": interval_s, "reply_chars": len(_reply()), "chunk_ms": chunk_ms,
                           "modes": {}}  # fmt: skip
    for mode, rs in runs.items():
        out["modes"][mode] = {key: round(statistics.median(r[key] for r in rs), 2) for key in
                              ("calls_per_turn", "edits_per_turn", "cpu_ms_per_turn", "first_text_ms",
                               "whole_reply_ms")}  # fmt: skip
        out["modes"][mode]["runs_cpu_ms"] = [round(r["cpu_ms_per_turn"], 1) for r in rs]
    off, deltas, on = out["modes"]["off"], out["modes"]["deltas"], out["modes"]["on"]
    out["streaming_costs"] = {
        "calls_per_turn": round(on["calls_per_turn"] - off["calls_per_turn"], 2),
        "cpu_ms_per_turn": round(on["cpu_ms_per_turn"] - off["cpu_ms_per_turn"], 2),
        "cpu_ms_per_turn_of_the_edits": round(on["cpu_ms_per_turn"] - deltas["cpu_ms_per_turn"], 2),
        "first_text_sooner_ms": round(off["first_text_ms"] - on["first_text_ms"], 1),
        "whole_reply_later_ms": round(on["whole_reply_ms"] - off["whole_reply_ms"], 1),
    }
    out["machine"] = machine()
    return out
