"""The context budget counts what the model receives, not the sections' raw text.

Regression: with ``context.budget_tokens: 6000`` a large memory sent 6,171 tokens, and a 1,000-token
working-memory cap was sent as 1,017, because the title line of every section and the ``> `` before
every quoted line were not counted.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.turn.budget import SECTION_SEPARATOR, assemble, estimate_tokens, render_section, sent_tokens
from gateway.types import ContextSection, Stability


def sent(sections: tuple[ContextSection, ...]) -> int:
    """Tokens of the system prompt as a provider joins it (gateway/llm/anthropic.py)."""
    return estimate_tokens(SECTION_SEPARATOR.join(render_section(s) for s in sections))


def recalled(lines: int) -> ContextSection:
    body = "\n".join(f"[2024-05-{1 + i % 28:02d}] Ada said she likes sailing boat {i}." for i in range(lines))
    return ContextSection(source="memory.recall", title="Recalled memories", text=body, as_data=True,
                          trim_rank=10, priority=40)


def test_a_section_cap_covers_the_rendered_section() -> None:
    working = ContextSection(source="memory.working", title="Working memory", text="Ada plans a trip. " * 600,
                             budget=1000, stability=Stability.STABLE, as_data=True)
    out = assemble([working], 10_000)
    assert out.sections, "a capped section is cut, not dropped"
    assert estimate_tokens(render_section(out.sections[0])) <= 1000
    assert out.trims[0].reason == "section budget"


def test_the_total_budget_covers_titles_and_quote_marks() -> None:
    profile = ContextSection(source="memory.profile", title="About the user", text="Ada, engineer in London.",
                             protected=True, stability=Stability.STABLE, priority=90)
    facts = ContextSection(source="facts", title="Known facts", text="\n".join(f"- fact {i}" for i in range(900)),
                           as_data=True, trim_rank=20)
    # Many short quoted lines: the "> " prefixes alone are a large share of what is sent.
    out = assemble([profile, recalled(600), facts], 6000)
    assert sent(out.sections) <= 6000
    assert out.total_tokens <= 6000
    assert any(s.source == "memory.profile" for s in out.sections)


@settings(max_examples=60, deadline=None)
@given(lines=st.integers(1, 400), budget=st.integers(200, 3000), cap=st.integers(0, 800))
def test_assembled_prompt_never_exceeds_the_budget(lines: int, budget: int, cap: int) -> None:
    section = recalled(lines)
    if cap:
        section = ContextSection(source=section.source, title=section.title, text=section.text, as_data=True,
                                 budget=cap, trim_rank=10)
    out = assemble([section], budget)
    assert sent(out.sections) <= budget
    for s in out.sections:
        assert not cap or sent_tokens(s) <= cap
