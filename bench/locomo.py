"""``kith bench locomo --data FILE``: retrieval quality of memory recall on LoCoMo conversations.

Each conversation is ingested through ``MemoryService.index_turns`` (the batch form of per-turn
indexing; the daemon itself re-indexes the session-log Markdown through the ``memory.index`` job) into
its own user scope, every turn stamped with its session's date-time. Every question except category 5
(adversarial, no evidence) is then asked through ``MemoryService.recall``; no LLM is involved. With
``--qa``, answer accuracy instead (``bench/locomo_qa.py``: the main role answers, a judge role grades).

frac@k: share of a question's gold evidence turns among the first k retrieved turns (a hit that
spans several turns uses up that many of the k); all@k / any@k: all / at least one gold turn in the
first k; MRR@k: reciprocal rank of the first gold turn. Reported per category and overall, with
recall latency (query embedding included) and ingest throughput. The last line is one JSON object.

Leave-one-conversation-out (``loo`` in the JSON): ranking parameters chosen on the dev conversations
would flatter the dev score, so every tunable of ``RecallSettings`` is chosen by a small grid search
(``GRID``) on all conversations but one, and scored on the one left out; each conversation is held
out in turn. The held-out figures (per fold, their mean and spread) are the ones that predict unseen
conversations, and the ones recall changes are accepted on. Each question's candidates are retrieved
once and re-ranked under every setting by ``recall.rank`` (the function recall itself runs), so the
search costs seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

KS = (1, 5, 10, 25)
RETRIEVE = 100  # candidates per list fetched once per question; the grid's ``candidates`` cut them
# The grid of the leave-one-out search, in blocks. "base" holds the parameters recall had before
# issue 18; "full" adds a block for the query signals (speaker, dates) and session diversity. The
# search is block-coordinate: the full product of one block with the others held, block after block,
# until a round changes nothing (at most ``ROUNDS``). The settings recall had before issue 18 come first
# in each list: ties go to them.
BASE_BLOCK: dict[str, tuple[float, ...]] = {
    "dense_weight": (0.5, 0.3, 0.4, 0.6),
    "neighbor_weight": (0.3, 0.0, 0.15, 0.45, 0.6),
    "neighbor_window_s": (300.0, 60.0, 120.0, 900.0),
    "recency_weight": (0.25, 0.0),
}
SIGNAL_BLOCK: dict[str, tuple[float, ...]] = {
    "speaker_weight": (0.0, 0.1, 0.2, 0.4, 0.6),
    "date_weight": (0.0, 0.2),
    # ``diversity`` is left out (stays off): searched over (0, 0.02, 0.05) it was chosen in one fold of
    # three and lowered the held-out mean (docs/benchmarks.md, "Recall (leave-one-out)").
}
# "base" searches what recall could do before issue 18: the query signals off.
OFF_BLOCK: dict[str, tuple[float, ...]] = {k: (0.0,) for k in (*SIGNAL_BLOCK, "diversity")}
GRID: dict[str, list[dict[str, tuple[float, ...]]]] = {
    "base": [BASE_BLOCK, OFF_BLOCK],
    "full": [BASE_BLOCK, SIGNAL_BLOCK],
}
ROUNDS = 3
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D:?\s*(\d+)\s*:\s*0*(\d+)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="LoCoMo-format JSON (e.g. ../shared/data/locomo-dev.json)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary line")
    parser.add_argument("--backend", choices=["edge", "memory"], default="edge", help="memory = qdrant-client")
    parser.add_argument("--model", default=None, help="embedding model (default: config default)")
    parser.add_argument("--half-life", type=float, default=None, help="recency half-life in days (0 = off)")
    parser.add_argument("--dense-weight", type=float, default=None)
    parser.add_argument("--sparse-weight", type=float, default=None)
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument("--threads", type=int, default=None,
                        help="embedding threads (default: memory.embedding_threads; query path uses these too)")
    parser.add_argument("--grid", choices=["full", "base", "none"], default="full",
                        help="leave-one-out search grid (none = skip leave-one-out)")
    from bench import locomo_qa

    locomo_qa.configure(parser)


def normalise_evidence(items: list[Any]) -> list[str]:
    """``D8:6; D9:17`` -> two ids, ``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``."""
    out: list[str] = []
    for item in items:
        for m in _EVIDENCE.finditer(str(item)):
            ev = f"D{int(m.group(1))}:{int(m.group(2))}"
            if ev not in out:
                out.append(ev)
    return out


def parse_session_time(text: str) -> datetime:
    # "1:56 pm on 8 May, 2023"
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def turns_of(conv: dict[str, Any]) -> list[dict[str, Any]]:
    from gateway.memory.files.session_log import TurnRecord

    c = conv["conversation"]
    out = []
    n = 1
    while f"session_{n}" in c:
        start = parse_session_time(c[f"session_{n}_date_time"])
        for i, turn in enumerate(c[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                # What an adapter would pass on for a shared photo: its caption.
                text += f" [shares a photo: {turn['blip_caption']}]"
            rec = TurnRecord(
                turn_id=turn["dia_id"],
                session_id=f"{conv.get('sample_id', 'conv')}-s{n}",
                channel="locomo",
                speaker=turn["speaker"],
                text=text,
                timestamp=start + timedelta(seconds=30 * i),
            )
            out.append({"session": n, "record": rec})
        n += 1
    return out


def score(ranked_turns: list[str], gold: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    gold_set = set(gold)
    first = next((i + 1 for i, t in enumerate(ranked_turns) if t in gold_set), None)
    for k in KS:
        top = set(ranked_turns[:k])
        found = len(gold_set & top)
        out[f"frac@{k}"] = found / len(gold_set)
        out[f"all@{k}"] = float(found == len(gold_set))
        out[f"any@{k}"] = float(found > 0)
        out[f"mrr@{k}"] = 1.0 / first if first is not None and first <= k else 0.0
    return out


@dataclasses.dataclass
class Question:
    conv: str
    category: int
    gold: list[str]
    found: Any  # recall.Retrieved
    turns: dict[str, tuple[str, ...]]  # point id -> its turn ids


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from gateway.configread import parse_config
    from gateway.memory.search.recall import retrieve
    from gateway.memory.search.service import MemoryService

    data = json.loads(await asyncio.to_thread(Path(args.data).read_text, encoding="utf-8"))
    if args.limit:
        data = data[: args.limit]
    mem: dict[str, Any] = {} if args.threads is None else {"embedding_threads": args.threads}
    if args.backend == "memory":
        mem["qdrant_url"] = ":memory:"
    for key, val in (
        ("embedding_model", args.model),
        ("recency_half_life_days", args.half_life),
        ("dense_weight", args.dense_weight),
        ("sparse_weight", args.sparse_weight),
    ):
        if val is not None:
            mem[key] = val
    rows: list[tuple[int, dict[str, float]]] = []
    questions: list[Question] = []
    row_convs: list[str] = []  # the conversation (scope) of each row
    latencies: list[float] = []
    n_turns = 0
    ingest_s = 0.0
    with tempfile.TemporaryDirectory(prefix="kith-locomo-") as tmp:
        svc = MemoryService(parse_config({"data_dir": tmp, "memory": mem}, env={}))
        await svc.start()
        embedder = svc.loader.require_embedder().signature  # which way of running the model produced the figures
        try:
            for conv in data:
                scope = f"user:locomo-{conv.get('sample_id', len(rows))}"
                turns = turns_of(conv)
                t0 = time.perf_counter()
                for n in sorted({t["session"] for t in turns}):
                    await svc.indexing.index_turns(scope, [t["record"] for t in turns if t["session"] == n])
                ingest_s += time.perf_counter() - t0
                n_turns += len(turns)
                # Questions are asked after the conversation: "now" is a day after its last turn.
                now = max(t["record"].timestamp for t in turns) + timedelta(days=1)
                for qa in conv["qa"]:
                    gold = normalise_evidence(qa.get("evidence", []))
                    if qa.get("category") == 5 or not gold:
                        continue
                    t1 = time.perf_counter()
                    hits = await svc.recall(scope=scope, query=str(qa["question"]), k=max(KS), now=now)
                    latencies.append((time.perf_counter() - t1) * 1000)
                    ranked = [tid for h in hits for tid in h.turn_ids]
                    rows.append((int(qa["category"]), score(ranked, gold)))
                    row_convs.append(scope)
                    if args.grid != "none":
                        found = await asyncio.to_thread(
                            retrieve, svc.loader.index, svc.loader.embedder, svc.loader.sparse, scopes=[scope],
                            query=str(qa["question"]), limit=RETRIEVE, now=now,
                        )
                        ids = list({c.id for c in (*found.dense, *found.bm25)})
                        full = svc.loader.index._payloads(scopes=[scope], ids=ids)
                        turn_map = {pid: tuple(p.get("turn_ids") or ()) for pid, p in full.items()}
                        questions.append(Question(scope, int(qa["category"]), gold, found, turn_map))
        finally:
            await svc.close()
    threads = svc.config.memory.embedding_threads
    out = summarise(rows, latencies, n_turns, ingest_s, args) | {"embedder": embedder, "threads": threads}
    # The settings in force (the defaults), scored per conversation: the figures no fold may fall below.
    out["per_conversation"] = {
        c: _mean([r for rc, (_c, r) in zip(row_convs, rows, strict=True) if rc == c]) for c in dict.fromkeys(row_convs)
    }
    if questions:
        out["ranking_cost"] = ranking_cost(questions, svc.settings)
    if args.grid != "none":
        t0 = time.perf_counter()
        out["loo"] = leave_one_out(questions, svc.settings, GRID[args.grid])
        out["loo"]["search_s"] = round(time.perf_counter() - t0, 1)
    return out


def ranking_cost(questions: list[Question], settings: Any) -> dict[str, float]:
    """What reading the query (``Query.parse``: words, time ranges) and ``rank`` cost per recall, on
    real candidate lists: the part of recall latency that is pure Python, apart from the index."""
    from gateway.memory.search.recall import Query, rank

    parse, ranking = [], []
    for q in questions:
        p, r = [], []
        for _ in range(3):  # the fastest of three: a shared machine preempts a sub-millisecond step often
            t0 = time.perf_counter()
            Query.parse(q.found.query.text, q.found.at)
            t1 = time.perf_counter()
            rank(q.found, k=max(KS), settings=settings)
            p.append((t1 - t0) * 1000)
            r.append((time.perf_counter() - t1) * 1000)
        parse.append(min(p))
        ranking.append(min(r))
    pq, rq = statistics.quantiles(parse, n=100), statistics.quantiles(ranking, n=100)
    return {"parse_p50_ms": round(pq[49], 3), "parse_p95_ms": round(pq[94], 3),
            "rank_p50_ms": round(rq[49], 3), "rank_p95_ms": round(rq[94], 3)}


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(100 * statistics.fmean(r[k] for r in rows), 1) for k in ("frac@5", "frac@10")} if rows else {}


def evaluate(questions: list[Question], settings: Any) -> list[dict[str, float]]:
    """Each question's scores when its candidates are ranked under ``settings``."""
    from gateway.memory.search.recall import rank

    out = []
    for q in questions:
        top = rank(q.found, k=max(KS), settings=settings)
        out.append(score([t for _s, cid, _p in top for t in q.turns.get(cid, ())], q.gold))
    return out


def leave_one_out(
    questions: list[Question], defaults: Any, blocks: list[dict[str, tuple[float, ...]]]
) -> dict[str, Any]:
    """Choose settings on all conversations but one, score the one left out; rotate.

    The objective is the mean of frac@5 and frac@10 over the training questions (each question
    counts once, so a bigger conversation weighs more)."""
    convs = list(dict.fromkeys(q.conv for q in questions))
    memo: dict[tuple[tuple[str, float], ...], dict[str, float]] = {}

    def objective(combo: dict[str, float]) -> dict[str, float]:
        """conversation -> sum over its questions of (frac@5 + frac@10) / 2, under ``combo``."""
        key = tuple(sorted(combo.items()))
        if key not in memo:
            per_conv = dict.fromkeys(convs, 0.0)
            for q, r in zip(questions, evaluate(questions, _apply(defaults, combo)), strict=True):
                per_conv[q.conv] += (r["frac@5"] + r["frac@10"]) / 2
            memo[key] = per_conv
        return memo[key]

    def search(train: list[str]) -> dict[str, float]:
        current = {k: vals[0] for block in blocks for k, vals in block.items()}
        for _ in range(ROUNDS):
            before = dict(current)
            for block in blocks:
                keys = list(block)
                combos = [current | dict(zip(keys, v, strict=True)) for v in itertools.product(*block.values())]
                # max keeps the first of equals: the earlier grid values, i.e. the defaults.
                current = max(combos, key=lambda c: sum(objective(c)[t] for t in train))
            if current == before:
                break
        return current

    folds = []
    held_rows: list[tuple[int, dict[str, float]]] = []
    for held in convs:
        chosen = search([c for c in convs if c != held])
        test = [q for q in questions if q.conv == held]
        rows = list(zip((q.category for q in test), evaluate(test, _apply(defaults, chosen)), strict=True))
        held_rows.extend(rows)
        folds.append({"held_out": held, "n": len(test), "chosen": chosen, **_mean([r for _c, r in rows]),
                      "per_category": _per_category(rows)})
    f5 = [f["frac@5"] for f in folds]
    f10 = [f["frac@10"] for f in folds]
    return {
        "grid": [{k: list(v) for k, v in block.items()} for block in blocks],
        "settings_scored": len(memo),
        "folds": folds,
        "frac@5": round(statistics.fmean(f5), 1),
        "frac@10": round(statistics.fmean(f10), 1),
        "spread": {"frac@5": [min(f5), max(f5)], "frac@10": [min(f10), max(f10)],
                   "stdev@5": round(statistics.pstdev(f5), 1), "stdev@10": round(statistics.pstdev(f10), 1)},
        # Every question scored by settings tuned without its conversation, pooled.
        "pooled": _mean([r for _c, r in held_rows]),
        "per_category": _per_category(held_rows),
        # The same search on every dev conversation: what the shipped defaults should be.
        "chosen_on_all": search(convs),
    }


def _apply(defaults: Any, combo: dict[str, float]) -> Any:
    return dataclasses.replace(defaults, **_settings(combo))


def _settings(combo: dict[str, float]) -> dict[str, float]:
    # dense + sparse = 1: only their ratio matters to the fusion, the sum to the additive boosts.
    out = dict(combo)
    if "dense_weight" in out:
        out["sparse_weight"] = round(1.0 - out["dense_weight"], 6)
    return out


def _per_category(rows: list[tuple[int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {CATEGORIES.get(c, str(c)): _mean([r for cc, r in rows if cc == c]) for c in sorted({c for c, _ in rows})}


def summarise(
    rows: list[tuple[int, dict[str, float]]], lat: list[float], n_turns: int, ingest_s: float, args: Any
) -> dict[str, Any]:
    def mean(cat: int | None) -> dict[str, float]:
        sel = [r for c, r in rows if cat is None or c == cat]
        return {k: round(100 * statistics.fmean(r[k] for r in sel), 1) for k in sel[0]} if sel else {}

    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0] if lat else 0.0] * 99
    overall = mean(None)
    return {
        "bench": "locomo",
        "backend": args.backend,
        "model": args.model or "default",
        "n": len(rows),
        "frac@5": overall.get("frac@5", 0.0),
        "frac@10": overall.get("frac@10", 0.0),
        "p50_ms": round(q[49], 2),
        "p95_ms": round(q[94], 2),
        "p99_ms": round(q[98], 2),
        "ingest_turns_per_s": round(n_turns / ingest_s, 1) if ingest_s else 0.0,
        "turns": n_turns,
        "overall": overall,
        "per_category": {CATEGORIES.get(c, str(c)): mean(c) for c in sorted({c for c, _ in rows})},
    }


def main(args: argparse.Namespace) -> int:
    if not Path(args.data).is_file():
        print(f"no such data file: {args.data}", file=sys.stderr)
        return 2
    if args.qa:
        from bench import locomo_qa

        return locomo_qa.main_qa(args)
    result = asyncio.run(run(args))
    if not args.json:
        o = result["overall"]
        print(f"LoCoMo recall over {result['n']} questions, {result['turns']} turns ({result['backend']})")
        for k in KS:
            print(
                f"  k={k:<3} frac {o[f'frac@{k}']:5.1f}  all {o[f'all@{k}']:5.1f}  "
                f"any {o[f'any@{k}']:5.1f}  mrr {o[f'mrr@{k}']:5.1f}"
            )
        for cat, m in result["per_category"].items():
            print(f"  {cat:<12} frac@5 {m['frac@5']:5.1f}  frac@10 {m['frac@10']:5.1f}")
        print(
            f"  latency p50 {result['p50_ms']} ms  p95 {result['p95_ms']} ms  p99 {result['p99_ms']} ms;"
            f" ingest {result['ingest_turns_per_s']} turns/s"
        )
        for conv, m in result["per_conversation"].items():
            print(f"  {conv:<20} frac@5 {m['frac@5']:5.1f}  frac@10 {m['frac@10']:5.1f}  (defaults)")
        if "ranking_cost" in result:
            c = result["ranking_cost"]
            print(f"  per recall: query signals p50 {c['parse_p50_ms']} ms p95 {c['parse_p95_ms']} ms;"
                  f" ranking p50 {c['rank_p50_ms']} ms p95 {c['rank_p95_ms']} ms (candidates: RETRIEVE per list)")
        if "loo" in result:
            loo = result["loo"]
            print(f"Leave-one-conversation-out ({loo['settings_scored']} settings scored, {loo['search_s']} s):")
            for f in loo["folds"]:
                print(f"  held out {f['held_out']:<20} frac@5 {f['frac@5']:5.1f}  frac@10 {f['frac@10']:5.1f}"
                      f"  chosen {f['chosen']}")
            sp = loo["spread"]
            print(f"  mean frac@5 {loo['frac@5']} ({sp['frac@5'][0]}-{sp['frac@5'][1]})"
                  f"  frac@10 {loo['frac@10']} ({sp['frac@10'][0]}-{sp['frac@10'][1]})")
            for cat, m in loo["per_category"].items():
                print(f"  {cat:<12} frac@5 {m['frac@5']:5.1f}  frac@10 {m['frac@10']:5.1f}  (held out, pooled)")
            print(f"  chosen on all: {loo['chosen_on_all']}")
    print(json.dumps(result, sort_keys=True))
    return 0
