"""``kith bench locomo --qa``: answer accuracy on LoCoMo, judged by a model (issue 28).

Published memory systems report answer accuracy beside retrieval: each question answered by a model
from the system's context, and graded by a judge model (LLM-as-judge "J", the protocol of the Mem0
paper: generous on wording, strict on the fact), with token F1 and BLEU-1 against the gold answer, by
category, and prompt tokens per question. Two modes, run the same way:

* ``memory``: the ``main`` role answers from what a real turn sends about memory: the conversation
  ingested into a person's index, recalled with the turn's ``memory.recall_k`` and rendered by the
  turn's own ``hits_section`` within ``memory.recall_budget_tokens``, under a short system prompt;
* ``full``: the baseline, the whole conversation (every session, dated) in the prompt.

The ``judge`` role grades (``llm.roles.judge``; without one, ``main`` judges, which the summary says).
Any provider kith speaks works: an OpenAI-compatible endpoint or Anthropic (docs/benchmarks.md has the
command). Each graded answer is appended to ``--out`` (JSON lines) as it comes: a run stopped part-way
resumes where it stopped, and a progress bar on stderr says how far it is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import string
import sys
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.locomo import CATEGORIES, turns_of
from gateway.types import ContextSection, HistoryMessage, LLMRequest, ResponseFormat

MODES = ("memory", "full")
ANSWER_SYSTEM = ("You are a personal assistant answering a question about past conversations. Answer in a short "
                 "phrase, using only what you are given; dates as they were said. If it is not there, say you "
                 "do not know.")  # fmt: skip
JUDGE_SYSTEM = """You grade an answer to a question about past conversations against the gold answer.
Label it CORRECT or WRONG. Be generous with wording: an answer that names the same thing, person, place or
event as the gold answer is CORRECT, even if longer; for a time question, the same date or period in another
format (or relative to the conversation's date) is CORRECT. An answer that misses the fact, contradicts it,
or says it does not know is WRONG. Answer with JSON only: {"reasoning": "<one sentence>", "label": "CORRECT"}
or {"reasoning": "...", "label": "WRONG"}."""
VERDICT = ResponseFormat(name="verdict", description="The grade of the answer.", schema={
    "type": "object", "properties": {"reasoning": {"type": "string"},
                                     "label": {"type": "string", "enum": ["CORRECT", "WRONG"]}},
    "required": ["label"]})  # fmt: skip
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``--qa`` options, beside ``kith bench locomo``'s own."""
    group = parser.add_argument_group("answer accuracy (--qa)")
    group.add_argument("--qa", action="store_true",
                       help="answer every question with the main role and grade it with the judge role "
                            "(J, F1, BLEU-1 by category; -c names the config with the roles)")  # fmt: skip
    group.add_argument("--out", default="locomo-qa.jsonl",
                       help="graded answers, one JSON line each; a run resumes from it (default: %(default)s)")
    group.add_argument("--modes", default=",".join(MODES),
                       help="memory (recalled context, as a turn sends it), full (the whole conversation); "
                            "default: both")  # fmt: skip
    group.add_argument("--questions", type=int, default=0, help="only the first N questions of each conversation")
    group.add_argument("--concurrency", type=int, default=4, help="questions asked at once")


# ---------------------------------------------------------------------------------------- scores
def _tokens(text: str) -> list[str]:
    """SQuAD's normalisation: lower case, no punctuation, no articles."""
    text = "".join(ch for ch in str(text).lower() if ch not in set(string.punctuation))
    return [w for w in text.split() if w not in ("a", "an", "the")]


def f1(answer: str, gold: str) -> float:
    pred, ref = _tokens(answer), _tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or not common:
        return float(pred == ref)
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(answer: str, gold: str) -> float:
    """Unigram precision (clipped) with the brevity penalty."""
    pred, ref = _tokens(answer), _tokens(gold)
    if not pred or not ref:
        return 0.0
    matched = sum((Counter(pred) & Counter(ref)).values())
    penalty = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return penalty * matched / len(pred)


def label_of(text: str) -> str:
    """The judge's label: from its JSON, else the first CORRECT/WRONG it wrote; WRONG when neither."""
    try:
        data = json.loads(text)
        if isinstance(data, dict) and str(data.get("label", "")).upper() in ("CORRECT", "WRONG"):
            return str(data["label"]).upper()
    except ValueError:
        pass
    m = _LABEL.search(text.upper())
    return m.group(1) if m else "WRONG"


# ------------------------------------------------------------------------------------- contexts
def full_context(conv: dict[str, Any]) -> str:
    c = conv["conversation"]
    parts, n = [], 1
    while f"session_{n}" in c:
        parts.append(f"## Session {n}, {c[f'session_{n}_date_time']}")
        parts += [f"{t['speaker']}: {t['text']}" + (f" [shares a photo: {t['blip_caption']}]"
                                                     if t.get("blip_caption") else "") for t in c[f"session_{n}"]]
        n += 1
    return "\n".join(parts)


def _request(role: str, system: list[ContextSection], question: str, max_tokens: int,
             fmt: ResponseFormat | None = None) -> LLMRequest:  # fmt: skip
    return LLMRequest(system=tuple(system), messages=(HistoryMessage(role="user", content=question),), role=role,
                      stream=False, max_tokens=max_tokens, response_format=fmt)  # fmt: skip


def _done(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by a stop mid-write: asked again
        if isinstance(row, dict) and "key" in row:
            out[row["key"]] = row
    return out


class Progress:
    def __init__(self, total: int, done: int) -> None:
        self.total, self.done = total, done

    def step(self) -> None:
        self.done += 1
        width = 30
        filled = int(width * self.done / max(1, self.total))
        sys.stderr.write(f"\rqa [{'#' * filled}{'-' * (width - filled)}] {self.done}/{self.total}")
        if self.done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


# ------------------------------------------------------------------------------------------ run
async def run_qa(args: argparse.Namespace, config: Any) -> dict[str, Any]:
    from gateway.configread import parse_config
    from gateway.llm.provider import make_provider
    from gateway.memory.search.recall_context import hits_section
    from gateway.memory.search.service import MemoryService

    data = json.loads(await asyncio.to_thread(Path(args.data).read_text, encoding="utf-8"))
    if args.limit:
        data = data[: args.limit]
    modes = [m for m in args.modes.split(",") if m in MODES]
    out_path = Path(args.out)
    done = _done(out_path)
    main = make_provider(config.llm.role("main"))
    judged_by = "judge" if "judge" in config.llm.roles else "main"
    judge = make_provider(config.llm.role(judged_by)) if judged_by == "judge" else main
    asks: list[tuple[str, dict[str, Any], int, dict[str, Any]]] = []  # key, conv, index, qa
    for conv in data:
        qas = [qa for qa in conv["qa"] if qa.get("category") != 5 and "answer" in qa]
        for i, qa in enumerate(qas[: args.questions or None]):
            for mode in modes:
                asks.append((f"{mode}:{conv.get('sample_id', '')}:{i}", conv, i, qa | {"mode": mode}))
    todo = [a for a in asks if a[0] not in done]
    progress = Progress(len(asks), len(asks) - len(todo))
    lock = asyncio.Lock()
    gate = asyncio.Semaphore(max(1, args.concurrency))
    with tempfile.TemporaryDirectory(prefix="kith-locomo-qa-") as tmp:
        svc = MemoryService(parse_config({"data_dir": tmp}, env={}))
        await svc.start()
        try:
            nows: dict[str, Any] = {}
            for conv in {id(c): c for _k, c, _i, qa in todo if qa["mode"] == "memory"}.values():
                scope = f"user:locomo-{conv.get('sample_id', 'conv')}"
                turns = turns_of(conv)
                for n in sorted({t["session"] for t in turns}):
                    await svc.indexing.index_turns(scope, [t["record"] for t in turns if t["session"] == n])
                nows[scope] = max(t["record"].timestamp for t in turns) + timedelta(days=1)

            async def one(key: str, conv: dict[str, Any], qa: dict[str, Any]) -> None:
                async with gate:
                    question = str(qa["question"])
                    system = [ContextSection(source="bench", title="", text=ANSWER_SYSTEM)]
                    if qa["mode"] == "memory":
                        scope = f"user:locomo-{conv.get('sample_id', 'conv')}"
                        hits = await svc.recall(scope=scope, query=question, k=config.memory.recall_k,
                                                now=nows[scope])  # fmt: skip
                        section = hits_section(hits, budget_tokens=config.memory.recall_budget_tokens)
                        system += [section] if section is not None else []
                    else:
                        system.append(ContextSection(source="bench", title="The conversations",
                                                     text=full_context(conv), as_data=True))  # fmt: skip
                    answer = await main.complete(_request("main", system, question, 200))
                    gold = str(qa["answer"])
                    verdict = await judge.complete(_request(judged_by, [ContextSection(
                        source="bench", title="", text=JUDGE_SYSTEM)], f"Question: {question}\nGold answer: {gold}\n"
                        f"Generated answer: {answer.text.strip()}", 300, VERDICT))  # fmt: skip
                    row = {"key": key, "mode": qa["mode"], "category": int(qa["category"]), "question": question,
                           "gold": gold, "answer": answer.text.strip(), "label": label_of(verdict.text),
                           "f1": f1(answer.text, gold), "bleu1": bleu1(answer.text, gold),
                           "prompt_tokens": answer.input_tokens}  # fmt: skip
                    async with lock:
                        await asyncio.to_thread(_append, out_path, row)
                        done[key] = row
                        progress.step()

            await asyncio.gather(*(one(k, c, qa) for k, c, _i, qa in todo))
        finally:
            await svc.close()
            await main.close()
            if judge is not main:
                await judge.close()
    rows = [done[k] for k, _c, _i, _qa in asks if k in done]
    return summarise(rows, modes) | {"judge_role": judged_by, "out": str(out_path)}


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _scores(rows: list[dict[str, Any]]) -> dict[str, float]:
    if not rows:
        return {"n": 0}
    return {"n": len(rows),
            "J": round(100 * statistics.fmean(r["label"] == "CORRECT" for r in rows), 1),
            "F1": round(100 * statistics.fmean(r["f1"] for r in rows), 1),
            "BLEU-1": round(100 * statistics.fmean(r["bleu1"] for r in rows), 1),
            "prompt_tokens": round(statistics.fmean(r["prompt_tokens"] for r in rows), 1)}  # fmt: skip


def summarise(rows: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        out[mode] = {"overall": _scores(mine), "per_category": {
            CATEGORIES.get(c, str(c)): _scores([r for r in mine if r["category"] == c])
            for c in sorted({r["category"] for r in mine})}}  # fmt: skip
    return out


def main_qa(args: argparse.Namespace) -> int:
    from gateway.cli.common import load_or_exit

    config = load_or_exit(args)
    result = asyncio.run(run_qa(args, config))
    if not args.json:
        for mode in (m for m in MODES if m in result):
            o = result[mode]["overall"]
            if not o["n"]:
                continue
            print(f"{mode:<7} J {o['J']:5.1f}  F1 {o['F1']:5.1f}  BLEU-1 {o['BLEU-1']:5.1f}  "
                  f"prompt tokens/question {o['prompt_tokens']:.0f}  (n={o['n']})")  # fmt: skip
            for cat, s in result[mode]["per_category"].items():
                print(f"  {cat:<12} J {s['J']:5.1f}  F1 {s['F1']:5.1f}  BLEU-1 {s['BLEU-1']:5.1f}  (n={s['n']})")
        print(f"judged by the {result['judge_role']!r} role; answers in {result['out']}")
    print(json.dumps(result))
    return 0
