"""The ``memory_remember`` tool (tier 2, writes): keep one line the person asked to be remembered.

The host's ``gateway.memory.edit.remember.remember`` does the work (``REMEMBERED.md``, guarded store,
audited as ``remember:tool``, re-indexed at once); a model-written line is screened for instructions.
Never offered Off-The-Record (``writes``) or in a group (``private``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.memory.edit.remember import MAX_CHARS, remember
from gateway.tools import Tool, ToolContext, ToolError
from plugins.tools.common import str_arg


async def memory_remember(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    text = str_arg(args, "text", required=True, max_len=MAX_CHARS)
    if ctx.gateway.memory is None:
        raise ToolError("memory is not available")
    report = await remember(ctx.gateway, ctx.user_id, text, actor="tool", trust="model", message_id=ctx.message_id)
    if report.status == "refused":
        raise ToolError(report.message)
    return report.message


TOOL = Tool(
    name="memory_remember",
    description=("Remember one thing for the person you are talking with, when they ask you to "
                 "(\"remember that ...\"): a short, self-contained statement about them or their world. "
                 "It is kept in their memory file REMEMBERED.md and found by memory_search from then on."),
    input_schema={"type": "object", "properties": {
        "text": {"type": "string", "description": "the statement to keep, one line"},
    }, "required": ["text"]},
    handler=memory_remember, writes=True,
)
