"""The fake model servers answer by request kind (tests/fakes/kinds.py): every stage's system prompt, as
the stage renders it, is told apart, and a chat turn's is a ``turn``."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.memory.background import compaction, distill, sleep, writer
from gateway.memory.hygiene import judged
from gateway.memory.search import filter_tier
from gateway.testing import message
from gateway.turn.budget import render_section
from gateway.types import ContextSection
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.kinds import KINDS, check_kind, request_kind

PROMPTS = {
    "memory_writer": writer.SYSTEM,
    "compaction": compaction.SYSTEM,
    "extraction": sleep.EXTRACT_SYSTEM.replace("{predicates}", "lives_in, works_at"),
    "curation": sleep.CURATE_SYSTEM.replace("{pattern_sections}", "Habits"),
    "distillation": distill.LONG_SYSTEM.replace("{budget}", "800"),
    "hygiene": judged.INSTRUCTIONS,
    "recall_filter": filter_tier.INSTRUCTIONS,
}


@pytest.mark.parametrize("kind", sorted(PROMPTS))
def test_each_stage_prompt_is_its_own_kind(kind: str) -> None:
    rendered = render_section(ContextSection(source=kind, title="", text=PROMPTS[kind]))
    assert request_kind(rendered) == kind
    assert request_kind(distill.MID_SYSTEM.replace("{budget}", "300")) == "distillation"


async def test_a_chat_turns_request_is_a_turn(
    make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    await gw.handle_inbound(message("What do you remember about my boat?"))
    [turn] = fake_anthropic.turn_requests()
    assert fake_anthropic.kind_of(turn) == "turn"


def test_an_unknown_kind_is_refused() -> None:
    assert set(KINDS) >= {"turn", *PROMPTS}
    with pytest.raises(ValueError, match="unknown request kind"):
        check_kind("memory-writer")
