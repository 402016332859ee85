"""Spending model calls by reconnecting (issue 12, item 8).

The per-connection bucket started full on every connection: reconnecting between messages gave 178
model calls in 8 s with none refused. Buckets now belong to the user and outlive connections, one
bucket bounds everyone together, and a cap on concurrent turns answers ``busy`` instead of queueing
without end. Model calls are counted at the Anthropic fake, through the real SDK.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import GatewayFactory, WSClient
from tests.fakes.anthropic import FakeAnthropic

MANY_NEW = {"new_users_per_minute": 1000, "new_users_burst": 1000,
            "global_new_users_per_minute": 1000, "global_new_users_burst": 1000}


async def test_reconnecting_does_not_refill_the_bucket(
    make_gateway: GatewayFactory, ws_connect: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0},
                            server={"rate_limit": {"messages_per_minute": 60, "burst": 20}})
    outcomes: list[str] = []
    for _ in range(40):  # reconnect before every second message, as the attack did
        client: WSClient = await ws_connect(gw)
        assert (await client.hello("flooder"))["type"] == "ready"
        for _ in range(2):
            frame, _ = await client.ask("spend")
            outcomes.append(frame.get("code", frame["type"]))
        await client.ws.close()
    calls = len(fake_anthropic.turn_requests())
    assert calls == outcomes.count("reply")
    # 20 saved up, plus one a second for the few seconds the test takes
    assert 20 <= calls <= 30, outcomes
    assert outcomes.count("rate_limited") == 80 - calls


async def test_one_bucket_for_everyone(
    make_gateway: GatewayFactory, ws_connect: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    limits = {**MANY_NEW, "messages_per_minute": 60, "burst": 20,
              "global_messages_per_minute": 1, "global_burst": 12}
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, server={"rate_limit": limits})
    outcomes: list[str] = []
    for i in range(10):  # ten identities, each well within its own bucket
        client: WSClient = await ws_connect(gw)
        await client.hello(f"sock-{i}")
        for _ in range(3):
            frame, _ = await client.ask("spend")
            outcomes.append(frame.get("code", frame["type"]))
    assert outcomes.count("reply") == 12 == len(fake_anthropic.turn_requests())
    assert outcomes.count("rate_limited") == 18


async def test_concurrent_turns_are_capped_with_a_busy_error(
    make_gateway: GatewayFactory, ws_connect: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0},
                            server={"rate_limit": {**MANY_NEW, "max_concurrent_turns": 2}})
    clients: list[WSClient] = []
    for i in range(6):
        client = await ws_connect(gw)
        await client.hello(f"c{i}")
        clients.append(client)
    fake_anthropic.default_delay_s = 1.0
    results = await asyncio.gather(*(c.ask("slow one") for c in clients))
    codes = sorted(frame.get("code", frame["type"]) for frame, _ in results)
    assert codes == ["busy"] * 4 + ["reply"] * 2
    busy = next(frame for frame, _ in results if frame.get("code") == "busy")
    assert "try again" in busy["message"]
    assert len(fake_anthropic.turn_requests()) == 2
    # slots are given back: once the running turns are done, everyone is served again
    fake_anthropic.default_delay_s = 0.0
    frame, _ = await clients[5].ask("now?")
    assert frame["type"] == "reply"
