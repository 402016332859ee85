"""``kith bench sleep``: wall time of one nightly sleep cycle, model latency excluded.

A real gateway (state, memory service, job bus) on a temporary data directory records ``--turns`` turns
in the transcript the way the turn protocol persists them (``Sessions.record``: setup, not measured),
then one night runs for that user: gather the day's turns into
the budget, one extraction call, ``memories/<day>.md``, facts into the graph, one curation call with
rails. The model is an in-process stub that answers instantly with a realistic structured answer (20
memories, 15 facts, 6 curation ops), so the figure is kith's own cost. ``night_ms`` is the cycle
itself; ``indexed_ms`` adds waiting until the written files are re-indexed (embedding included).
Each of ``--nights`` nights gets ``--turns`` fresh turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import machine, percentile
from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.memory.background import jobscope
from gateway.memory.background.sleep import NightScope, run_night
from gateway.types import InboundMessage, LLMRequest, LLMResponse

CITIES = ["Munich", "Lisbon", "Oslo", "Tromsø", "Ghent", "Porto", "Kyoto", "Lyon"]


def extraction(night: int) -> str:
    lines = (f"- Night {night}: Alice discussed plan {i} about {CITIES[i % 8]} in detail." for i in range(20))
    memories = "\n".join(lines)
    facts = [{"subject": "user", "predicate": "lives_in", "object": CITIES[night % 8]}]
    facts += [{"subject": f"Friend {i}", "predicate": "lives_in", "object": CITIES[(i + night) % 8]} for i in range(14)]
    topics = {f"topic {i}": round(1 - i / 10, 2) for i in range(5)}
    return f"MEMORIES:\n{memories}\nFACTS:\n{json.dumps(facts)}\nTOPICS:\n{json.dumps(topics)}\n"


def curation(night: int) -> str:
    ops = [{"op": "append", "section": "Notes", "text": f"Night {night} note {i}."} for i in range(5)]
    ops.append({"op": "replace", "section": "Notes", "old": f"Night {night - 1} note 0.", "new": "Older note."})
    return json.dumps({"ops": ops})


class InstantModel:
    """Answers at once: extraction first, then curation, per night."""

    name = "instant"

    def __init__(self) -> None:
        self.night = 0
        self.prompt_chars: list[int] = []

    async def complete(self, request: LLMRequest, on_delta: Any = None) -> LLMResponse:
        prompt = request.messages[-1].content
        self.prompt_chars.append(len(prompt))
        text = curation(self.night) if prompt.startswith("CURRENT USER.md") else extraction(self.night)
        return LLMResponse(text=text, model="instant", stop_reason="end_turn")

    async def close(self) -> None:
        return None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--turns", type=int, default=200, help="turns per night")
    parser.add_argument("--nights", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    parser.set_defaults(func=main)


async def run(turns: int, nights: int) -> dict[str, Any]:
    night_ms: list[float] = []
    indexed_ms: list[float] = []
    model = InstantModel()
    with tempfile.TemporaryDirectory(prefix="kith-bench-sleep-") as tmp:
        cfg = parse_config({
            "data_dir": str(Path(tmp) / "data"), "llm": {"provider": "echo"}, "log_level": "WARNING",
            "plugins": {"entry_points": False},
            # The writer would summarise these sessions too; this benchmark measures the night alone.
            "background": {"writer": {"enabled": False}},
        }, env={})  # fmt: skip
        async with Gateway(cfg, entry_points=False, serve_http=False, supervise=False) as gw:
            uid = ""
            for n in range(1, nights + 1):
                for i in range(turns):
                    text = f"Night {n}, message {i}: thinking about {CITIES[i % 8]} and plan {i % 17} with friends."
                    msg = InboundMessage(channel="websocket", account_id="alice", text=text, display_name="Alice",
                                         trusted=True, timestamp=datetime.now(UTC))  # fmt: skip
                    user = await gw.hooks.resolve_identity(gw, msg)
                    assert user is not None
                    session = gw.sessions.current(user, msg, msg.timestamp)
                    gw.sessions.record(session, turn_id=f"n{n}t{i}", user_text=text, reply_text=f"Noted: {text}",
                                       channel="websocket", speaker="Alice", at=msg.timestamp)  # fmt: skip
                    uid = user.user_id
                scope = jobscope.for_user(gw, uid)
                ns = NightScope(key=scope.memory_scope, sessions=scope.sessions, kg_scope=uid, self_id=uid,
                                self_names=("Alice",), curate=True)  # fmt: skip
                at = datetime.now(UTC) + timedelta(minutes=n)
                model.night = n
                t0 = time.perf_counter()
                result = await run_night(state=gw.state, kg=gw.kg, store=jobscope.store(gw, scope), provider=model,
                                         scope=ns, slot=at.strftime("%Y-%m-%dT%H:%M"), before=at, tz=scope.tz,
                                         cfg=cfg.background.sleep, rails=cfg.background.curation)  # fmt: skip
                night_ms.append((time.perf_counter() - t0) * 1000)
                await gw.settle()
                indexed_ms.append((time.perf_counter() - t0) * 1000)
                assert result.status == "done" and result.turns == 2 * turns, result
            facts = len(gw.kg.all(uid))
    return {
        "bench": "sleep", "turns_per_night": turns, "nights": nights,
        "night_ms_p50": round(percentile(night_ms, 0.5), 1), "night_ms_max": round(max(night_ms), 1),
        "indexed_ms_p50": round(percentile(indexed_ms, 0.5), 1), "indexed_ms_max": round(max(indexed_ms), 1),
        "extraction_prompt_chars": max(model.prompt_chars[::2]), "facts_in_graph": facts,
        "machine": machine(),
    }  # fmt: skip


def main(args: argparse.Namespace) -> int:
    result = asyncio.run(run(args.turns, args.nights))
    if not args.json:
        print(f"one night over {args.turns} turns: {result['night_ms_p50']} ms (p50 of {args.nights}), "
              f"{result['indexed_ms_p50']} ms with re-indexing")  # fmt: skip
    print(json.dumps(result))
    return 0
