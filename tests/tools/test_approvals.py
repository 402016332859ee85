"""Approvals of tools that act (``Tool.needs_approval``, gateway/approvals.py, plugins/tools/approvals.py):
a third-party plugin's tool driven by the scripted model through the real client. Nothing happens
before its person's /approve; another person, an expired approval, a denied one, a veto or an
Off-The-Record conversation at approval time do nothing; every step is audited."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from gateway.app import Gateway
from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolContext, ToolError, approvals
from gateway.types import InboundMessage, ToolCall, Turn
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic


class Outbox:
    """A plugin with one acting tool: ``send_note`` (what it would send is its preview)."""

    __name__ = "outbox_tools"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.blocked = False

    def preview(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        if not str(args.get("to", "")).strip():
            raise ToolError("'to' is required")
        return f"Send {args['text']!r} to {args['to']}."

    def send(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        self.sent.append((str(args["to"]), str(args["text"])))
        return f"sent to {args['to']}"

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        register(Tool(name="send_note", description="Send a note.", handler=self.send, preview=self.preview,
                      needs_approval=True, private=False, writes=True,
                      input_schema={"type": "object", "properties": {"to": {"type": "string"},
                                                                     "text": {"type": "string"}}}))

    @hookimpl
    def gateway_before_tool_call(self, turn: Turn, call: ToolCall) -> str | None:
        return "notes are blocked now" if self.blocked else None


def dm(text: str, account: str = "alice") -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, conversation_id=account, text=text, trusted=True,
                          timestamp=datetime.now(UTC))


async def ask(gw: Gateway, fake: FakeAnthropic, args: dict[str, Any]) -> str:
    fake.enqueue_tool_use("send_note", args)
    fake.enqueue("asked")
    await gw.handle_inbound(dm("send it"))
    (result,) = fake.tool_results()
    content = result["content"]
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    match = re.search(r"/approve ([0-9a-f]+)", text)
    return match.group(1) if match else text


async def say(gw: Gateway, text: str, account: str = "alice") -> str:
    reply = await gw.handle_inbound(dm(text, account))
    assert reply is not None
    return reply.text


async def test_nothing_happens_before_the_persons_approval(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    outbox = Outbox()
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, plugins=(outbox,))
    assert "/approve ID" in await say(gw, "/help")
    assert "'to' is required" in await ask(gw, fake_anthropic, {"to": " ", "text": "x"})

    first = await ask(gw, fake_anthropic, {"to": "bob", "text": "lunch at 1?"})
    assert outbox.sent == [], "asking sends nothing"
    assert "Send 'lunch at 1?' to bob." in await say(gw, "/approve")
    assert "no pending approval" in await say(gw, f"/approve {first}", account="bob"), "only alice can answer"
    assert (await say(gw, f"/approve {first}")) == "sent to bob"
    assert outbox.sent == [("bob", "lunch at 1?")]
    assert "no pending approval" in await say(gw, f"/approve {first}"), "used once"

    denied = await ask(gw, fake_anthropic, {"to": "carol", "text": "hi"})
    assert (await say(gw, f"/deny {denied}")).startswith("Denied; nothing was done")
    assert "no pending approval" in await say(gw, f"/approve {denied}")

    vetoed = await ask(gw, fake_anthropic, {"to": "dan", "text": "hi"})
    outbox.blocked = True
    assert "notes are blocked now" in await say(gw, f"/approve {vetoed}"), "the policy is asked again"
    outbox.blocked = False

    otr = await ask(gw, fake_anthropic, {"to": "fay", "text": "hi"})
    await say(gw, "/otr on")
    assert "Off-The-Record" in await say(gw, f"/approve {otr}"), "nothing that writes runs Off-The-Record"
    await say(gw, "/otr off")

    expired = await ask(gw, fake_anthropic, {"to": "erin", "text": "hi"})
    book = approvals(gw)
    book._pending[expired] = replace(book._pending[expired], expires_at=0.0)  # its ten minutes are up
    assert "no pending approval" in await say(gw, f"/approve {expired}")
    assert outbox.sent == [("bob", "lunch at 1?")], "only the approved call ran"
    outcomes = [(e.approval_id, e.outcome) for e in book.audit]
    assert (first, "done") in outcomes and (denied, "denied") in outcomes and (vetoed, "refused") in outcomes
    assert (expired, "expired") in outcomes and (otr, "refused") in outcomes


async def test_a_person_can_make_a_tool_always_allowed_for_themselves(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    outbox = Outbox()
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, plugins=(outbox,))
    first = await ask(gw, fake_anthropic, {"to": "bob", "text": "one"})
    assert "Not done" in await say(gw, f"/approve {first} always", account="bob"), "not bob's to answer"
    answer = await say(gw, f"/approve {first} always")
    assert answer.startswith("sent to bob") and "Always allowed from now on" in answer
    assert "Always allowed for you: send_note" in await say(gw, "/approve")

    assert (await ask(gw, fake_anthropic, {"to": "carol", "text": "two"})) == "sent to carol", "ran without asking"
    assert outbox.sent == [("bob", "one"), ("carol", "two")]
    assert "'to' is required" in await ask(gw, fake_anthropic, {"to": " ", "text": "x"}), "the preview still checks"
    book = approvals(gw)
    assert [e.outcome for e in book.audit if e.approval_id == "always"] == ["always allowed", "done"]

    # Only for her: Bob's call still asks.
    fake_anthropic.enqueue_tool_use("send_note", {"to": "dan", "text": "three"})
    fake_anthropic.enqueue("asked")
    await gw.handle_inbound(dm("send it", account="bob"))
    assert "NOT DONE YET" in str(fake_anthropic.tool_results()[0]["content"])
    assert len(outbox.sent) == 2

    assert "asks for your approval again" in await say(gw, "/approve never send_note")
    asked = await ask(gw, fake_anthropic, {"to": "erin", "text": "four"})
    assert re.fullmatch(r"[0-9a-f]{6}", asked) and len(outbox.sent) == 2, "asked again"
    assert "was not always allowed" in await say(gw, "/approve never send_note")
