"""Recalled memories as a system-prompt section, for the plugin that runs recall each turn.

The section is volatile (it changes every turn, so it goes after the prompt-cache breakpoint), is
rendered as quoted data (memories may contain text someone else wrote: never instructions), and is
the first thing the budgeter trims.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.memory.search.recall import Hit
from gateway.turn.budget import TRIM_RECALLED
from gateway.types import ContextSection, Stability

SOURCE = "memory.recall"
_CHARS_PER_TOKEN = 4  # rough, English; the budgeter does the exact trimming


def format_hit(hit: Hit, max_chars: int = 600) -> str:
    when = hit.date[:10] if hit.date else ""
    origin = ", ".join(x for x in (when, hit.source) if x)
    text = " ".join(hit.text.split())
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return f"- ({origin}) {text}"


def hits_section(hits: Sequence[Hit], *, budget_tokens: int = 600) -> ContextSection | None:
    if not hits:
        return None
    lines: list[str] = []
    used = 0
    for hit in hits:  # best first: stop before the budget, never cut a memory in half
        line = format_hit(hit)
        if lines and used + len(line) > budget_tokens * _CHARS_PER_TOKEN:
            break
        lines.append(line)
        used += len(line) + 1
    return ContextSection(
        source=SOURCE,
        title="Recalled memories",
        text="\n".join(lines),
        priority=40,
        budget=budget_tokens,
        stability=Stability.VOLATILE,
        trim_rank=TRIM_RECALLED,
        as_data=True,
    )

