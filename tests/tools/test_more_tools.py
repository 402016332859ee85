"""Tools loaded on demand (``Tool.deferred``, gateway/tools.py): a rarely used tool's schema is not in the
request; the ``more_tools`` catalogue names it, gives its input on request and runs it, end to end
through the real Anthropic client and the fake server, behind the same gates, veto and approval as a
tool offered directly."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolContext
from gateway.types import InboundMessage, ToolCall, Turn
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic


class Outbox:
    """A third-party plugin with one rarely used acting tool, ``send_note`` (deferred, needs approval)."""

    __name__ = "outbox_tools"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.seen: list[str] = []  # the names gateway_before_tool_call was asked about

    def send(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        self.sent.append((str(args["to"]), str(args["text"])))
        return f"sent to {args['to']}"

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        register(Tool(name="send_note", description="Send a note to someone. Only when asked to.", handler=self.send,
                      preview=lambda ctx, args: f"Send {args['text']!r} to {args['to']}.", needs_approval=True,
                      writes=True, deferred=True, summary="send a note (needs approval)",
                      input_schema={"type": "object", "properties": {"to": {"type": "string"},
                                                                     "text": {"type": "string"}},
                                    "required": ["to", "text"]}))  # fmt: skip

    @hookimpl
    def gateway_before_tool_call(self, turn: Turn, call: ToolCall) -> str | None:
        self.seen.append(call.name)
        return None


def dm(text: str, account: str = "alice") -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, conversation_id=account, text=text, trusted=True,
                          timestamp=datetime.now(UTC))


def results(fake: FakeAnthropic, index: int = -1) -> list[str]:
    out = []
    for r in fake.tool_results(index):
        content = r["content"]
        out.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content))
    return out


async def test_a_deferred_tool_is_loaded_and_run_on_demand(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    outbox = Outbox()
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, plugins=(outbox,))
    fake_anthropic.enqueue_tool_use("more_tools", {"tool": "send_note"})
    fake_anthropic.enqueue_tool_use("more_tools", {"tool": "send_note", "input": {"to": "bob", "text": "lunch?"}})
    fake_anthropic.enqueue("I need your approval first.")
    reply = await gw.handle_inbound(dm("send bob a note: lunch?"))
    assert reply is not None and reply.text == "I need your approval first."

    first, loaded, ran = fake_anthropic.turn_requests()[-3:]
    names = [t["name"] for t in first["tools"]]
    assert "send_note" not in names and "memory_forget" not in names and names[-1] == "more_tools"
    catalogue = next(t["description"] for t in first["tools"] if t["name"] == "more_tools")
    assert "- send_note: send a note (needs approval)" in catalogue and "- memory_forget:" in catalogue
    assert "Send a note to someone" not in json.dumps(first), "the description loads on demand"
    (schema,) = results(fake_anthropic, fake_anthropic.requests.index(loaded))
    assert schema.startswith("send_note: Send a note to someone. Only when asked to.")
    assert '"required":["to","text"]' in schema
    (asked,) = results(fake_anthropic, fake_anthropic.requests.index(ran))
    assert asked.startswith("NOT DONE YET") and "Send 'lunch?' to bob." in asked
    assert outbox.sent == [] and outbox.seen == ["more_tools", "more_tools", "send_note"], \
        "the policy hook sees the real tool's name"
    found = re.search(r"/approve ([0-9a-f]+)", asked)
    assert found is not None
    done = await gw.handle_inbound(dm(f"/approve {found.group(1)}"))
    assert done is not None and done.text == "sent to bob" and outbox.sent == [("bob", "lunch?")]

    # A real built-in one, end to end: memory_forget through the catalogue.
    fake_anthropic.enqueue_tool_use("memory_remember", {"text": "Alice's locker code is 4711."})
    fake_anthropic.enqueue("kept")
    await gw.handle_inbound(dm("remember my locker code is 4711"))
    fake_anthropic.enqueue_tool_use("more_tools", {"tool": "memory_forget", "input": {"text": "locker code"}})
    fake_anthropic.enqueue("forgotten")
    await gw.handle_inbound(dm("forget my locker code"))
    (forgot,) = results(fake_anthropic)
    assert "4711" in forgot and not fake_anthropic.tool_results()[0].get("is_error"), forgot
    remembered = (gw.config.data_dir / "users" / gw.identities.lookup("websocket", "alice") / "REMEMBERED.md")
    assert "4711" not in remembered.read_text(encoding="utf-8"), forgot


async def test_the_catalogue_keeps_every_gate(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                              anthropic_llm: dict[str, Any]) -> None:
    outbox = Outbox()
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, plugins=(outbox,))
    await gw.handle_inbound(dm("/otr on"))
    fake_anthropic.enqueue_tool_use("more_tools", {"tool": "send_note", "input": {"to": "bob", "text": "x"}})
    fake_anthropic.enqueue("ok")
    await gw.handle_inbound(dm("send it"))
    catalogue = next(t["description"] for t in fake_anthropic.requests[-2]["tools"] if t["name"] == "more_tools")
    assert "send_note" not in catalogue and "memory_forget" not in catalogue and "- follow_links:" in catalogue, \
        "Off-The-Record: only the reading ones"
    (refused,) = fake_anthropic.tool_results()
    assert refused.get("is_error") and "no such tool 'send_note'" in results(fake_anthropic)[0]
    assert outbox.sent == [] and "send_note" not in outbox.seen
    await gw.handle_inbound(dm("/otr off"))

    fake_anthropic.enqueue_tool_use("more_tools", {"tool": "send_note", "input": {"to": "bob"}})
    fake_anthropic.enqueue("ok")
    await gw.handle_inbound(dm("send it"))
    assert "missing required input: text" in results(fake_anthropic)[0]


async def test_the_first_prompt_with_search_calendar_and_mail_stays_within_the_goal() -> None:
    """Issue 32's goal, as ``kith bench turn --first-prompt`` measures it: <= 1,500 tokens."""
    from bench.first_prompt import run_first_prompt

    measured = await run_first_prompt()
    offered = set(measured["tool_chars"])
    assert {"web_search", "web_fetch", "calendar_list", "mail_list", "mail_read", "more_tools"} <= offered
    assert not offered & {"calendar_change", "mail_send", "mail_draft"}, "deferred: behind more_tools"
    assert measured["prompt_tokens"] <= 1500, measured
