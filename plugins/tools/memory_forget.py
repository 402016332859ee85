"""The ``memory_forget`` tool (tier 2, writes): forget what the person asked to be forgotten.

The host's ``gateway.memory.edit.forget.forget`` does the work (lines of the person's files, facts,
index points; audited as ``forget:tool``, undoable). The model can apply only a narrow match: a broad
or by-meaning one is returned as a list for the person, who confirms it themselves with
``/forget confirm`` (a model talked into forgetting cannot wipe a memory on its own).
Never offered Off-The-Record (``writes``) or in a group (``private``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.memory.edit.forget import forget
from gateway.tools import Tool, ToolContext, ToolError
from plugins.tools.common import str_arg


async def memory_forget(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    text = str_arg(args, "text", required=True, max_len=500)
    if ctx.gateway.memory is None or ctx.gateway.kg is None:
        raise ToolError("memory is not available")
    report = await forget(ctx.gateway, ctx.user_id, text=text, actor="tool")
    if report.status == "refused":
        raise ToolError(report.message)
    if report.status == "confirm":
        return (report.describe() + "\n\nNothing was removed yet. Show the person this list: they confirm "
                "with /forget confirm themselves.")
    return report.describe()


TOOL = Tool(
    name="memory_forget",
    description=("Forget something the person asked you to forget (\"forget that ...\"): removes the "
                 "matching lines of their memory files, the matching facts and search entries, and tells "
                 "exactly what was removed. A broad match is only listed: the person confirms it with "
                 "/forget confirm. They can undo with /forget undo."),
    input_schema={"type": "object", "properties": {
        "text": {"type": "string", "description": "what to forget, in the person's words"},
    }, "required": ["text"]},
    handler=memory_forget, writes=True, timeout_s=60.0,
    deferred=True, summary="forget what the person asks you to forget",  # rare: its schema loads on demand
)
