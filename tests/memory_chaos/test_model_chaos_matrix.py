"""The model-chaos matrix (issue 28): every stage x every misbehaviour (tests/memory_chaos/misbehave.py)
x ``SEEDS`` shapes of it (where a cut falls, which half is dropped, how long a burst lasts), each on a
fresh person, every guarantee checked (tests/memory_chaos/runner.py). Long: behind the ``modelchaos``
marker (``-m modelchaos``). It prints a table of outcomes per stage; docs/benchmarks.md keeps the
figures of a run."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from gateway.testing import GatewayFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory_chaos.misbehave import MISBEHAVIOURS
from tests.memory_chaos.runner import Outcome, run_case
from tests.memory_chaos.stages import STAGES
from tests.memory_chaos.world import chaos_gateway, person

SEEDS = int(os.environ.get("KITH_MODELCHAOS_SEEDS", "3"))

pytestmark = [pytest.mark.chaos, pytest.mark.modelchaos]


@pytest.mark.parametrize("stage", list(STAGES))
async def test_model_chaos_matrix(stage: str, make_gateway: GatewayFactory, chaos_model: FakeOpenAI) -> None:
    gw = await chaos_gateway(make_gateway, chaos_model)
    outcomes: list[Outcome] = []
    for seed in range(SEEDS):
        for misbehaviour in ("good", *MISBEHAVIOURS):
            p = await person(gw, chaos_model)
            outcomes.append(await run_case(STAGES[stage], misbehaviour, p, seed=seed))
    results = Counter(o.result for o in outcomes)
    by_kind = {m: Counter(o.result for o in outcomes if o.misbehaviour == m) for m in ("good", *MISBEHAVIOURS)}
    print(f"\nMODELCHAOS {stage}: {len(outcomes)} runs, {dict(results)}, "
          f"{sum(o.requests for o in outcomes)} requests, {sum(o.seconds for o in outcomes):.1f} s in the stage; "
          + ", ".join(f"{m} {dict(c)}" for m, c in by_kind.items()))  # fmt: skip
    problems = [(o.misbehaviour, p) for o in outcomes for p in o.problems]
    assert problems == []
    assert all(o.result == "ok" for o in outcomes if o.misbehaviour == "good")
