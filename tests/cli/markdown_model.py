"""A stand-in model for the ``kith chat`` pty tests, loaded by the daemon through ``plugins.modules``:
"markdown please" is answered with Markdown streamed in pieces, "markdown at once" with the same in one
piece, "slowly please" with the same streamed over ~10 s (to interrupt it); everything else goes to the
echo model."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from gateway.hookspecs import hookimpl
from gateway.types import LLMRequest, LLMResponse

MARKDOWN = """# Packing list

- passport
- **warm** jacket

| day | place |
|-----|-------|
| Mon | Oslo  |

Run `kith chat` again.
"""


@hookimpl
async def gateway_llm_call(request: LLMRequest, on_delta: Callable[[str], Any] | None) -> LLMResponse | None:
    asked = request.messages[-1].content
    if asked not in ("markdown please", "markdown at once", "slowly please"):
        return None
    if on_delta is not None and asked != "markdown at once":
        for i in range(0, len(MARKDOWN), 16):
            if asked == "slowly please":
                await asyncio.sleep(1.5)
            result = on_delta(MARKDOWN[i:i + 16])
            if inspect.isawaitable(result):
                await result
    return LLMResponse(text=MARKDOWN, provider="markdown-test")
