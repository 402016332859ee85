"""Why a turn went without recall although recall was on: said in its context record and ``kith context``.

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


def unavailable(memory: MemoryService) -> str | None:
    """Why recall cannot run now, or None when it can."""
    if not memory.ready:
        return LOADING
    if memory.load_error:
        return f"the memory index did not load: {memory.load_error}"
    return None
