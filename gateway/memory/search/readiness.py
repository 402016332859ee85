"""Why a turn went without recall although recall was on, or with keyword-only recall: said in its
context record and ``kith context``.

The daemon answers before its embedder and index have loaded (``MemoryService.start(background=True)``);
a turn in that first second or two runs without recall rather than waiting, and says so, so a reply
that "forgot" something can be told apart from a recall that found nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.memory.search.service import MemoryService

RECALL_SKIPPED = StashKey[str]()

LOADING = "the memory index was still loading (the gateway had just started)"


KEYWORD_ONLY = "keyword only"


def unavailable(memory: MemoryService) -> str | None:
    """Why recall cannot run now, or None when it can (perhaps on keywords alone: ``degraded``)."""
    if not memory.ready:
        return LOADING
    return None


def degraded(memory: MemoryService) -> str | None:
    """Why recall runs on keywords alone (BM25 over the files, no index), or None when it does not.
    Said in the turn's context record like a skipped recall, starting with ``KEYWORD_ONLY``."""
    if not memory.keyword_only:
        return None
    why = f"the memory index did not load: {memory.load_error}" if memory.load_error else "the index is not open"
    return f"{KEYWORD_ONLY} ({why})"
