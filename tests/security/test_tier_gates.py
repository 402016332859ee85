"""A file that enters at a higher context tier does not leak through the tier-2 memory tools.

``SCRATCH.md`` and ``TASKS.json`` are tier 4 and ``MEMORY_LONG.md`` tier 3 (gateway/turn/tiers.py). A tier-2
turn gets ``memory_get`` and ``memory_search``; neither may read, list or quote those files, however
the path is spelled, while a turn at the file's own tier still can.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.app import Gateway
from gateway.types import InboundMessage
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic

SCRATCH_SECRET = "draft resignation letter to Globex, send Friday"


def dm(text: str, tier: int) -> InboundMessage:
    return InboundMessage(channel="websocket", account_id="alice", conversation_id="alice", text=text, trusted=True,
                          timestamp=datetime.now(UTC), raw={"tier": tier})


async def call(gw: Gateway, fake: FakeAnthropic, tool: str, args: dict[str, Any], tier: int) -> dict[str, Any]:
    """One turn in which the model calls ``tool`` once and then answers; returns the tool_result block."""
    fake.enqueue_tool_use(tool, args)
    fake.enqueue("done")
    reply = await gw.handle_inbound(dm("use a tool", tier))
    assert reply is not None and reply.text == "done"
    (result,) = fake.tool_results()
    return result


async def setup(make_gateway: GatewayFactory, anthropic_llm: dict[str, Any]) -> Gateway:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.handle_inbound(dm("hi", 2))
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    store = gw.memory_store(uid)
    store.write("SCRATCH.md", f"Plan: {SCRATCH_SECRET}.\n", source="test")
    store.write("TASKS.json", '{"tasks": [{"id": "t1", "text": "hide the Globex letter"}]}\n', source="test")
    store.write("MEMORY_LONG.md", "Long term: grew up in Tromso.\n", source="test")
    store.write("notes.md", "Ordinary note: likes the Globex cafeteria.\n", source="test")
    await gw.settle()
    return gw


async def test_memory_get_refuses_files_above_the_turns_tier(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    gw = await setup(make_gateway, anthropic_llm)
    for path in ("SCRATCH.md", "./SCRATCH.md", "/SCRATCH.md", "TASKS.json", "MEMORY_LONG.md"):
        res = await call(gw, fake_anthropic, "memory_get", {"path": path}, tier=2)
        assert res.get("is_error") and "not available at context tier 2" in res["content"], path
        assert "Globex" not in res["content"] and "Tromso" not in res["content"], path
    listing = (await call(gw, fake_anthropic, "memory_get", {"path": ""}, tier=2))["content"]
    assert "notes.md" in listing
    assert "SCRATCH.md" not in listing and "TASKS.json" not in listing and "MEMORY_LONG.md" not in listing

    # At the file's own tier it stays readable.
    assert (await call(gw, fake_anthropic, "memory_get", {"path": "MEMORY_LONG.md"}, tier=3))["content"].endswith(
        "Tromso.\n")
    assert SCRATCH_SECRET in (await call(gw, fake_anthropic, "memory_get", {"path": "SCRATCH.md"}, tier=4))["content"]
    assert "SCRATCH.md" in (await call(gw, fake_anthropic, "memory_get", {"path": ""}, tier=4))["content"]


async def test_memory_search_does_not_quote_files_above_the_turns_tier(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    gw = await setup(make_gateway, anthropic_llm)
    low = (await call(gw, fake_anthropic, "memory_search", {"query": "Globex resignation letter", "k": 10},
                      tier=2))["content"]
    assert "cafeteria" in low, "ordinary files are still found"
    assert "resignation" not in low and "(SCRATCH.md)" not in low and "(TASKS.json)" not in low
    high = (await call(gw, fake_anthropic, "memory_search", {"query": "Globex resignation letter", "k": 10},
                       tier=4))["content"]
    assert "resignation" in high and "(SCRATCH.md)" in high


def test_file_loads_normalizes_the_path() -> None:
    from gateway.turn.tiers import file_loads

    for spelling in ("SCRATCH.md", "./SCRATCH.md", "/SCRATCH.md", " SCRATCH.md", "scratch.md", "SCRATCH.md/"):
        assert not file_loads(2, spelling) and file_loads(4, spelling), spelling
    assert file_loads(2, "notes/SCRATCH.md"), "only the root scratchpad is the tier-4 file"
