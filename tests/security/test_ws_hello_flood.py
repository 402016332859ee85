"""Minting users over the WebSocket (issue 12, item 8).

Each new ``client_id`` is a new user with a memory tree and a row every scheduler tick walks. Before
the fix one connection sent 80,000 ``hello`` frames and created 80,000 users in 16 s. Now a
connection has one identity for its lifetime, and new users are rate-limited per client address and
for everyone together; people who come back are never counted as new.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from gateway.app import Gateway
from tests.conftest import GatewayFactory, WSClient
from tests.storage import select_one


def users(gw: Gateway) -> int:
    row = select_one(gw.state, "SELECT COUNT(*) FROM users")
    return int(row[0]) if row else 0


@pytest.fixture
async def from_address() -> AsyncIterator[Any]:
    """``connect(gw, "127.0.0.2")``: a WebSocket client whose source address is that loopback address."""
    sessions: list[aiohttp.ClientSession] = []

    async def connect(gw: Gateway, address: str) -> WSClient:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(address, 0)))
        sessions.append(session)
        return WSClient(await session.ws_connect(f"http://127.0.0.1:{gw.port}/ws"))

    yield connect
    for session in sessions:
        await session.close()


async def test_one_connection_cannot_mint_users(make_gateway: GatewayFactory, ws_connect: Any) -> None:
    gw = await make_gateway()
    client: WSClient = await ws_connect(gw)
    first = await client.hello("first")
    assert first["type"] == "ready"
    flood = 2_000
    for i in range(flood):
        await client.ws.send_str(json.dumps({"type": "hello", "client_id": f"minted-{i}"}))
    codes = [(await client.recv())["code"] for _ in range(flood)]
    assert set(codes) == {"already_identified"}
    assert users(gw) == 1
    # the connection is still the first client and still works
    reply, _ = await client.ask("still me?")
    assert reply["type"] == "reply" and "still me?" in reply["text"]
    assert set(gw.adapters["websocket"].connections) == {"first"}  # type: ignore[attr-defined]


async def test_same_client_id_again_is_idempotent(make_gateway: GatewayFactory, ws_connect: Any) -> None:
    gw = await make_gateway()
    client: WSClient = await ws_connect(gw)
    a = await client.hello("laptop", "Ann")
    b = await client.hello("laptop", "Ann")
    assert a["type"] == b["type"] == "ready" and a["user_id"] == b["user_id"]
    assert users(gw) == 1
    assert len(gw.adapters["websocket"].connections["laptop"]) == 1  # type: ignore[attr-defined]


async def test_new_users_are_rate_limited_per_address_and_globally(
    make_gateway: GatewayFactory, ws_connect: Any, from_address: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kith.adapters.websocket")
    limits = {"new_users_per_minute": 1, "new_users_burst": 3,
              "global_new_users_per_minute": 1, "global_new_users_burst": 5}
    # each client its own person (server.local_owner off): every new client_id is a new user
    gw = await make_gateway(server={"rate_limit": limits, "local_owner": False})
    answers = []
    for i in range(10):  # ten fresh identities from one address
        client: WSClient = await ws_connect(gw)
        answers.append(await client.hello(f"local-{i}"))
    assert [a["type"] for a in answers[:3]] == ["ready"] * 3
    refused = answers[3:]
    assert all(a["type"] == "error" and a["code"] == "rate_limited" for a in refused), refused
    assert "new" in refused[0]["message"]
    assert users(gw) == 3
    # another address has its own allowance, until the global one is spent
    others = []
    for i in range(4):
        client = await from_address(gw, "127.0.0.2")
        others.append((await client.hello(f"other-{i}"))["type"])
    assert others == ["ready", "ready", "error", "error"]
    assert users(gw) == 5
    # refusals are counted, and logged once a minute per kind rather than once each
    counts = gw.adapters["websocket"].health()["refused"]  # type: ignore[index]
    assert counts == {"new_users_address": 8, "new_users_global": 1}  # 127.0.0.2's 4th: its own 3 were taken
    assert len([r for r in caplog.records if "new clients" in r.getMessage()]) == 2
    # a refused connection stays open and may still say who it is: someone already known
    assert (await client.hello("local-0"))["type"] == "ready"
    # people coming back are not new users: never refused by this limit
    for _ in range(20):
        again: WSClient = await ws_connect(gw)
        assert (await again.hello("local-1"))["type"] == "ready"
    assert users(gw) == 5
