"""Issue 28, "A careless model never costs memory": every stage that asks a model, against a fake that
misbehaves as real models do, keeps every guarantee (tests/memory_chaos/runner.py): no line of the
person's memory lost (what a run removed is audited and undone byte for byte), no crash, a failed run
writes nothing and leaves its watermark, retries bounded, no injected instruction in a file.

This module runs a representative part on one gateway (each stage, the misbehaviours that cost memory
before: rewrites dropping lines, invented paths, injections, cut-offs; tests/background/test_malformed.py
and tests/memory_stages/test_writer_keeps_notes.py have more). The full matrix (every stage x every
misbehaviour x many shapes) is ``test_model_chaos_matrix.py`` behind the ``modelchaos`` marker;
docs/benchmarks.md has its figures."""

from __future__ import annotations

import pytest

from gateway.testing import GatewayFactory
from tests.fakes.openai_server import FakeOpenAI
from tests.memory_chaos.runner import run_case
from tests.memory_chaos.stages import PERSON_NEW, STAGES, TOPIC_NEW
from tests.memory_chaos.world import PEOPLE_LINES, TOPIC_LINES, chaos_gateway, lines, person

PICKED = (
    ("memory_writer", "good"), ("memory_writer", "drop_half"), ("memory_writer", "cut_at_limit"),
    ("extraction", "injected"), ("extraction", "cut_at_limit"), ("curation", "drop_half"), ("compaction", "drop_half"),
    ("distillation", "injected"), ("hygiene", "invented"), ("recall_filter", "burst_429"),
)  # fmt: skip


@pytest.mark.long
async def test_a_misbehaving_model_never_costs_a_line(make_gateway: GatewayFactory, chaos_model: FakeOpenAI) -> None:
    gw = await chaos_gateway(make_gateway, chaos_model)
    for stage, misbehaviour in PICKED:
        p = await person(gw, chaos_model)
        out = await run_case(STAGES[stage], misbehaviour, p, seed=1)
        assert out.problems == [], out
        assert out.result == "ok" if misbehaviour == "good" else out.result in ("ok", "retry"), out
        if stage == "memory_writer" and misbehaviour == "good":
            # The control: a good answer lands (and nothing was lost, so nothing was undone).
            assert PERSON_NEW in p.store.read(f"people/{p.slug}.md")
            assert TOPIC_NEW in p.store.read("topics/sailing.md")
            # Asked as structured output (gateway/memory/background/schemas.py); the answer was text.
            sent = chaos_model.requests_of("memory_writer")[-1]["response_format"]
            assert sent["json_schema"]["name"] == "memory_notes"
        if stage == "memory_writer" and misbehaviour == "drop_half":
            assert out.result == "ok"
            kept = lines(p.store.read(f"people/{p.slug}.md")) | lines(p.store.read("topics/sailing.md"))
            assert len(kept & lines("\n".join(PEOPLE_LINES + TOPIC_LINES))) == 60  # undone by lost_lines
        if misbehaviour == "cut_at_limit":
            assert out.result == "retry", out  # the bus retries it (and dead-letters it: tests/ops)
