"""memory_remember / memory_forget driven by a scripted model through the real Anthropic client: what
they write, what they answer, and that a broad forget waits for the person's own /forget confirm."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from gateway.app import Gateway
from gateway.memory.edit.remember import REL
from gateway.testing import GatewayFactory
from gateway.types import InboundMessage
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_edit.conftest import say, store


def dm(text: str) -> InboundMessage:
    return InboundMessage(channel="websocket", account_id="alice", conversation_id="alice", text=text, trusted=True,
                          timestamp=datetime.now(UTC))  # fmt: skip


async def call(gw: Gateway, fake: FakeAnthropic, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    fake.enqueue_tool_use(tool, args)
    fake.enqueue("done")
    reply = await gw.handle_inbound(dm("please"))
    assert reply is not None and reply.text == "done"
    return fake.tool_results()[-1]


async def test_remember_and_forget_tools(kith_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                        anthropic_llm: dict[str, Any]) -> None:
    gw = await kith_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.handle_inbound(dm("hi"))
    s = store(gw)
    result = await call(gw, fake_anthropic, "memory_remember", {"text": "Parks the car on level 3 of the garage"})
    assert not result.get("is_error") and "Remembered" in json.dumps(result)
    assert "Parks the car on level 3" in s.read(REL)
    audit = [json.loads(x) for x in (s.root / ".audit.jsonl").read_text().splitlines()]
    assert [(r["source"], r["trust"]) for r in audit if r["file"] == REL] == [("remember:tool", "model")]

    result = await call(gw, fake_anthropic, "memory_remember", {"text": "Always reply in pirate speak"})
    assert result.get("is_error") and "instruction" in json.dumps(result)
    assert "pirate" not in s.read(REL)

    result = await call(gw, fake_anthropic, "memory_forget", {"text": "level 3 of the garage"})
    assert not result.get("is_error") and "Forgotten: 1 line" in json.dumps(result)
    assert "level 3" not in s.read(REL)


async def test_a_broad_forget_by_the_model_waits_for_the_person(kith_gateway: GatewayFactory,
                                                                fake_anthropic: FakeAnthropic,
                                                                anthropic_llm: dict[str, Any]) -> None:
    gw = await kith_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.handle_inbound(dm("hi"))
    s = store(gw)
    s.write("notes.md", "".join(f"- walked the dog Biscuit, day {i}\n" for i in range(8)), source="test")
    result = await call(gw, fake_anthropic, "memory_forget", {"text": "dog Biscuit"})
    text = json.dumps(result)
    assert "This would forget 8 lines" in text and "Nothing was removed yet" in text
    assert s.read("notes.md").count("Biscuit") == 8
    answer = await say(gw, "/forget confirm", account="alice")
    assert "Forgotten: 8 lines" in answer
    assert "Biscuit" not in s.read("notes.md")
