"""A third-party plugin with one acting tool, ``send_note``: it needs the person's approval, and what
it would send is its preview. Shared by the approval tests of the chat platforms and the web chat."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolContext


class Outbox:
    __name__ = "outbox_tools"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        self.sent.append((str(args["to"]), str(args["text"])))
        return f"sent to {args['to']}"

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        register(Tool(name="send_note", description="Send a note.", handler=self.send, needs_approval=True,
                      preview=lambda ctx, args: f"Send {args['text']!r} to {args['to']}.", writes=True,
                      input_schema={"type": "object", "properties": {"to": {"type": "string"},
                                                                     "text": {"type": "string"}}}))  # fmt: skip
