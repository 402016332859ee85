"""What a model request asks for, read from the request itself: the fakes answer by it.

A chat turn and the background jobs it sets off (memory writer, nightly extraction, curation,
compaction, distillation, hygiene, the recall filter) reach the same model at moments a test does not
control. A fake that answered everyone from one queue let a writer job take the reply a test had queued
for the next chat turn, and tests passed or failed by timing. So every scripted answer is queued for a
kind, and a request takes answers of its own kind only.

A request's kind is found from its system prompt, by the opening words of each stage's instructions,
imported from the stage itself: a reworded prompt still classifies (tests/core/test_fake_kinds.py checks
that every stage's request does). Anything else is a ``turn`` (a conversation turn or one of its tool
rounds).
"""

from __future__ import annotations

from gateway.memory.background import compaction, distill, sleep, writer
from gateway.memory.hygiene import judged
from gateway.memory.search import filter_tier

TURN = "turn"


def _opening(prompt: str) -> str:
    return prompt.split("{", 1)[0][:60]  # up to a template field, if any


MARKERS: dict[str, tuple[str, ...]] = {
    "memory_writer": (_opening(writer.SYSTEM),),
    "compaction": (_opening(compaction.SYSTEM),),
    "extraction": (_opening(sleep.EXTRACT_SYSTEM),),
    "curation": (_opening(sleep.CURATE_SYSTEM),),
    "distillation": (_opening(distill.MID_SYSTEM), _opening(distill.LONG_SYSTEM)),
    "hygiene": (_opening(judged.INSTRUCTIONS),),
    "recall_filter": (_opening(filter_tier.INSTRUCTIONS),),
}
KINDS = (TURN, *MARKERS)


def request_kind(system: str) -> str:
    """The kind of a request whose system prompt (all its text, rendered) is ``system``."""
    for kind, openings in MARKERS.items():
        if any(opening in system for opening in openings):
            return kind
    return TURN


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown request kind {kind!r}; one of {', '.join(KINDS)}")
    return kind
