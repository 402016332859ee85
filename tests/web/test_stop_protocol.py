"""Working and stopping at the protocol level (docs/protocol.md#stopping-a-reply): a ``status`` frame
says the message is being answered and when a tool runs; a ``cancel`` frame stops the model call, and
the partial reply is kept and marked in the reply, the history and the session log; a ``redo`` message
regenerates or edits the last exchange without rewriting it (docs/protocol.md#regenerate-and-edit)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.hookspecs import hookimpl
from gateway.tools import Tool, ToolContext
from gateway.turn.stop import STOPPED_BEFORE, STOPPED_MARK
from tests.conftest import GatewayFactory, WSClient
from tests.fakes.anthropic import FakeAnthropic

LONG = " ".join(f"word{i}" for i in range(300))  # ~2,400 characters: 300 streamed pieces


async def frames_until_reply(client: WSClient, ref: str, *, cancel_after_deltas: int | None = None,
                             cancel: dict[str, Any] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    got: list[dict[str, Any]] = []
    while True:
        frame = await client.recv()
        got.append(frame)
        deltas = sum(f["type"] == "delta" for f in got)
        if cancel_after_deltas is not None and frame["type"] == "delta" and deltas == cancel_after_deltas:
            await client.ws.send_json(cancel or {"type": "cancel", "id": ref})
        if frame["type"] in ("reply", "error") and frame.get("id") == ref:
            return got


async def poll(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_stop_keeps_the_partial_reply_marked_everywhere(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], ws_connect: Any,
) -> None:
    fake_anthropic.chunk_delay_s = 0.02  # the whole answer would take 6 s
    fake_anthropic.enqueue(LONG)
    gw = await make_gateway(llm=anthropic_llm)
    client: WSClient = await ws_connect(gw)
    uid = (await client.hello("tab"))["user_id"]
    started = time.monotonic()
    await client.ws.send_json({"type": "message", "id": "m1", "text": "tell me everything"})
    got = await frames_until_reply(client, "m1", cancel_after_deltas=3)
    assert time.monotonic() - started < 4
    assert got[0] == {"type": "status", "id": "m1", "state": "thinking"}  # before any token
    reply = got[-1]
    shown = "".join(f["text"] for f in got if f["type"] == "delta")
    assert reply["stopped"] is True and reply["notice"] is False
    assert reply["text"] == f"{shown.rstrip()}\n\n{STOPPED_MARK}" and len(shown) < len(LONG)
    # The history and the session log keep exactly that.
    await client.ws.send_json({"type": "history", "id": "h"})
    history = await client.recv()
    while history["type"] != "history":  # the state frame of the session the turn opened comes first
        history = await client.recv()
    assert [(m["role"], m["text"]) for m in history["messages"]] == [("user", "tell me everything"),
                                                                     ("assistant", reply["text"])]
    logs = Path(gw.config.data_dir) / "users" / uid / "sessions"
    await poll(lambda: any(STOPPED_MARK in p.read_text() for p in logs.glob("*.md")))
    # The conversation goes on: the next message is answered whole, and the model sees the stop.
    fake_anthropic.chunk_delay_s = 0.0
    fake_anthropic.enqueue("Sorry, in short: yes.")
    answer, _ = await client.ask("short version?")
    assert answer["text"] == "Sorry, in short: yes." and "stopped" not in answer
    assert STOPPED_MARK in str(fake_anthropic.last_turn()["messages"])


async def test_stop_while_thinking_and_cancels_that_change_nothing(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], ws_connect: Any,
) -> None:
    fake_anthropic.enqueue("too late", delay_s=8.0)  # the first token would come after 8 s
    gw = await make_gateway(llm=anthropic_llm)
    client: WSClient = await ws_connect(gw)
    await client.hello("tab")
    # Nothing being answered: a cancel is not answered (the pong comes first), a bad id is a bad frame.
    await client.ws.send_json({"type": "cancel", "id": "nothing"})
    await client.ws.send_json({"type": "ping"})
    assert (await client.recv())["type"] == "pong"
    await client.ws.send_json({"type": "cancel", "id": ["x"]})
    assert (await client.recv())["code"] == "bad_frame"
    started = time.monotonic()
    await client.ws.send_json({"type": "message", "id": 7, "text": "think hard"})
    assert await client.recv() == {"type": "status", "id": 7, "state": "thinking"}
    await client.ws.send_json({"type": "cancel"})  # no id: whatever is being answered
    reply = await client.recv()
    assert time.monotonic() - started < 4
    assert reply["type"] == "reply" and reply["id"] == 7 and reply["stopped"] is True
    assert reply["text"] == STOPPED_BEFORE


class SlowTool:
    __name__ = "slow_tool"

    async def lookup(self, ctx: ToolContext, args: Mapping[str, Any]) -> str:
        return "found it"

    @hookimpl
    def gateway_register_tools(self, register: Any) -> None:
        register(Tool(name="lookup", description="Look something up.", input_schema={"type": "object"},
                      handler=self.lookup, private=False))


async def test_a_tool_call_is_shown_as_a_status(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], ws_connect: Any,
) -> None:
    fake_anthropic.enqueue_tool_use("lookup", {}, text="Let me look.")
    fake_anthropic.enqueue("It is found.")
    gw = await make_gateway(plugins=(SlowTool(),), llm=anthropic_llm)
    client: WSClient = await ws_connect(gw)
    await client.hello("tab")
    await client.ws.send_json({"type": "message", "id": "q", "text": "find it"})
    got = await frames_until_reply(client, "q")
    kinds = [(f["type"], f.get("state")) for f in got if f["type"] != "delta"]
    assert kinds == [("status", "thinking"), ("status", "tool"), ("reply", None)]
    assert next(f for f in got if f.get("state") == "tool")["tool"] == "lookup"
    assert got[-1]["text"].endswith("It is found.")


async def test_regenerate_and_edit_redo_the_last_exchange_and_keep_it(
    make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], ws_connect: Any,
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    client: WSClient = await ws_connect(gw)
    await client.hello("tab")
    fake_anthropic.enqueue("A first answer.")
    first, _ = await client.ask("what is kith?")
    # Regenerate: the same text, answered afresh: the model does not see the answer being redone.
    fake_anthropic.enqueue("A second answer.")
    await client.ws.send_json({"type": "message", "id": "r", "text": "what is kith?", "redo": first["turn_id"]})
    again = (await frames_until_reply(client, "r"))[-1]
    assert again["text"] == "A second answer."
    assert "A first answer." not in str(fake_anthropic.last_turn()["messages"])
    # Edit: another text for the last exchange, again without it.
    fake_anthropic.enqueue("An edited answer.")
    await client.ws.send_json({"type": "message", "id": "e", "text": "what is kith, briefly?",
                               "redo": again["turn_id"]})
    edited = (await frames_until_reply(client, "e"))[-1]
    assert edited["text"] == "An edited answer."
    assert "A second answer." not in str(fake_anthropic.last_turn()["messages"])
    # Only the last exchange can be redone; nothing is rewritten: every attempt is in the history.
    for redo, code in ((first["turn_id"], "stale"), (7, "bad_frame"), ("x" * 65, "bad_frame")):
        await client.ws.send_json({"type": "message", "id": "s", "text": "again", "redo": redo})
        refused = (await frames_until_reply(client, "s"))[-1]
        assert refused["type"] == "error" and refused["code"] == code, refused
    await client.ws.send_json({"type": "history", "id": "h"})
    while (history := await client.recv())["type"] != "history":
        pass
    assert [m["text"] for m in history["messages"]] == [
        "what is kith?", "A first answer.", "what is kith?", "A second answer.", "what is kith, briefly?",
        "An edited answer."]
