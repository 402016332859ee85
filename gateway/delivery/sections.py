"""A section of a person's briefing, as plugins contribute them (hook ``gateway_briefing_sections``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class BriefingSection:
    """``title`` heads the section; ``text`` is its body (plain text or Markdown, a few lines).
    ``order``: lower comes first; the built-in sections are 10 (tasks), 20 (reminders), 30 (working
    memory) and 40 (dates)."""

    source: str
    title: str
    text: str
    order: int = 50
