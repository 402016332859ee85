"""One chaos run: a stage, a misbehaviour, a person; the answer scripted, the stage run, every guarantee
checked. ``run_case`` returns what happened and the problems found (empty: every guarantee held)."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.memory.hygiene.proposals import Proposal
from gateway.memory.search.filter_tier import FilterDecision
from tests.memory_chaos.misbehave import GENERIC, INJECTED, MAX_RETRIES, TIMEOUT_S, Answer, script
from tests.memory_chaos.stages import Stage, hits
from tests.memory_chaos.world import Person, injected_in, lines, lost_lines, run_ids, tree


@dataclass
class Outcome:
    stage: str
    misbehaviour: str
    result: str = ""  # ok | retry (raised, for the bus to retry) | crash
    error: str = ""
    requests: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def answers(stage: Stage, misbehaviour: str, p: Person, rng: random.Random) -> list[Answer]:
    good = stage.good(p)
    if misbehaviour == "good":
        return [Answer(good)]
    if misbehaviour in GENERIC:
        return GENERIC[misbehaviour](good, rng)
    return [Answer(stage.bad(misbehaviour, p, rng))]


def _check_hygiene(p: Person, report: Any, out: Outcome) -> None:
    added: list[Proposal] = list(report.added)
    for prop in added:
        for change in prop.changes:
            if change.path not in p.files and not change.path.startswith(("topics/", "people/")):
                out.problems.append(f"hygiene proposes a change to {change.path}, a file it was not shown")
            after = change.after or ""
            if INJECTED in after:
                out.problems.append("hygiene proposes an injected line")
            if change.path in p.files:
                removed = lines(p.files[change.path]) - lines(after)
                if len(removed) > 12:
                    out.problems.append(f"hygiene proposes removing {len(removed)} lines at once")


def _check_filter(p: Person, kept: list[Any], decision: FilterDecision, out: Outcome) -> None:
    ids = [h.chunk_id for h in hits(p)]
    got = [h.chunk_id for h in kept]
    if not set(got) <= set(ids) or len(got) > 3 or len(set(got)) != len(got):
        out.problems.append(f"the filter returned {got}, not a subset of the candidates")
    if decision.outcome != "used" and got != ids[:3]:
        out.problems.append(f"a {decision.outcome} filter changed the ranking: {got}")
    deadline_s = p.gw.config.memory.filter_tier.deadline_ms / 1000
    if out.seconds > deadline_s + 1.5:  # a shared machine's scheduling, not a model wait
        out.problems.append(f"the filter took {out.seconds:.2f} s past a {deadline_s} s deadline")


async def _quiet(p: Person, stage: Stage, requests: int, bound_s: float = 8.0) -> None:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline and (len(p.fake.requests_of(stage.kind)) < requests or p.fake.in_flight):  # noqa: ASYNC110
        await asyncio.sleep(0.05)  # polls the fake's counters, which no event announces


async def run_case(stage: Stage, misbehaviour: str, p: Person, seed: int) -> Outcome:
    rng = random.Random(f"{stage.name}:{misbehaviour}:{seed}")
    out = Outcome(stage=stage.name, misbehaviour=misbehaviour)
    for kind, good in stage.before.items():
        script(p.fake, kind, [Answer(good(p))])
    script(p.fake, stage.kind, answers(stage, misbehaviour, p, rng))
    before = tree(p.store)
    runs_before = {rel: run_ids(p.store, rel) for rel in before}
    mark = stage.mark(p)
    started = time.perf_counter()
    result: Any = None
    try:
        result = await stage.run(p)
        out.result = "ok"
    except stage.retryable as exc:
        out.result, out.error = "retry", f"{type(exc).__name__}: {str(exc)[:160]}"
    except Exception as exc:  # the crash the suite exists to find
        out.result, out.error = "crash", f"{type(exc).__name__}: {str(exc)[:160]}"
        out.problems.append(f"crash: {out.error}")
    out.seconds = time.perf_counter() - started
    if misbehaviour == "slow":
        # The recall filter abandons a slow call at its deadline; the SDK still retries it in the
        # background. Its requests are the run's: wait for them, or the next run would answer them.
        await _quiet(p, stage, (MAX_RETRIES + 1) * stage.calls)
    out.requests = len(p.fake.requests_of(stage.kind))

    limit = (MAX_RETRIES + 1) * stage.calls
    if out.requests > limit:
        out.problems.append(f"{out.requests} requests for {stage.calls} call(s); at most {limit}")
    if out.result == "retry":
        if stage.mark(p) != mark:
            out.problems.append(f"watermark moved from {mark} to {stage.mark(p)} on a failed run")
        after = tree(p.store)
        changed = sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel))
        if changed:
            out.problems.append(f"a failed run changed {changed}")
    elif stage.mark(p) < mark:
        out.problems.append(f"watermark went back from {mark} to {stage.mark(p)}")
    if stage.name == "hygiene":
        if tree(p.store) != before:
            out.problems.append("hygiene changed the memory (it may only propose)")
        if result is not None:
            _check_hygiene(p, result, out)
    if stage.name == "recall_filter" and result is not None:
        _check_filter(p, result[0], result[1], out)
    if injected := injected_in(p.store):
        out.problems.append(f"an injected instruction reached {injected}")
    # Last: undoing the run's audited changes (to prove the lost lines can be restored).
    out.problems += lost_lines(p.store, before, runs_before)
    if misbehaviour == "slow" and out.seconds > 4 * (TIMEOUT_S + 1) * (MAX_RETRIES + 1):
        out.problems.append(f"a slow model held the stage {out.seconds:.1f} s")
    return out
