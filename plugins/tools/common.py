"""What every memory tool shares: argument checks and the attribution of a tool's writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.tools import ToolContext, ToolError


def write_kwargs(ctx: ToolContext, tool: str) -> dict[str, str]:
    """The audit attribution of a write the model made through ``tool`` in this turn."""
    return {"source": f"tool:{tool}", "message_id": ctx.message_id, "trust": "model"}


def str_arg(args: Mapping[str, Any], key: str, *, required: bool = False, max_len: int = 4000) -> str:
    value = args.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ToolError(f"'{key}' must be a string")
    value = value.strip()
    if required and not value:
        raise ToolError(f"'{key}' is required")
    if len(value) > max_len:
        raise ToolError(f"'{key}' is limited to {max_len} characters")
    return value
