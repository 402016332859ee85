"""The ``scratchpad`` tool (tier 4, writes): the model's own ``SCRATCH.md`` for longer work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.tools import Tool, ToolContext, ToolError
from plugins.tools.common import str_arg, write_kwargs

SCRATCH = "SCRATCH.md"


def scratchpad(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    action = str_arg(args, "action", required=True)
    store = ctx.store
    if action == "read":
        text = store.read(SCRATCH) if store.exists(SCRATCH) else ""
        return text or "The scratchpad is empty."
    if action in ("write", "append"):
        text = str_arg(args, "text", required=True, max_len=20_000)
        if action == "append" and store.exists(SCRATCH):
            old = store.read(SCRATCH)
            sep = "" if not old or old.endswith("\n") else "\n"
            size = store.append(SCRATCH, sep + text + "\n", **write_kwargs(ctx, "scratchpad"))
        else:
            size = store.write(SCRATCH, text + "\n", **write_kwargs(ctx, "scratchpad"))
        return f"Scratchpad saved ({size} bytes)."
    if action == "clear":
        store.write(SCRATCH, "", **write_kwargs(ctx, "scratchpad"))
        return "Scratchpad cleared."
    raise ToolError("'action' must be one of read, write, append, clear")


TOOL = Tool(
    name="scratchpad",
    description="Your private scratchpad (SCRATCH.md) for longer work: read, write (replace), append or clear.",
    input_schema={"type": "object", "properties": {
        "action": {"type": "string", "enum": ["read", "write", "append", "clear"]},
        "text": {"type": "string"},
    }, "required": ["action"]},
    handler=scratchpad, writes=True,
)
