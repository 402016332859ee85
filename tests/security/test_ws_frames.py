"""Odd frames and odd tokens, stale connections, work left behind (issue 12, item 8).

* 5,000-deep JSON escaped ``parse_frame`` as RecursionError and killed the connection.
* A non-ASCII token made ``hmac.compare_digest`` raise: HTTP 500 on the upgrade.
* A connection that re-sent ``hello`` stayed registered under its first id after it closed, so a
  reminder to that id was "delivered" to nobody and marked sent.
* Messages queued behind a running turn still ran (and called the model) after the client left.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gateway.types import ConversationAddress, Reply
from tests.channels.rig import wait_for
from tests.conftest import GatewayFactory, WSClient
from tests.fakes.anthropic import FakeAnthropic
from tests.storage import select_rows

TOKEN = "s3cret-token"


async def test_deeply_nested_json_is_bad_json_and_the_connection_lives(
    make_gateway: GatewayFactory, ws_connect: Any
) -> None:
    gw = await make_gateway(server={"max_frame_bytes": 64 * 1024})
    client: WSClient = await ws_connect(gw)
    await client.hello("c1")
    for deep in ("[" * 5_000 + "]" * 5_000, '{"a":' * 5_000 + "1" + "}" * 5_000, "[" * 30_000):
        await client.ws.send_str(deep)
        frame = await client.recv()
        assert frame["type"] == "error" and frame["code"] == "bad_json", frame
    deep_message = json.dumps({"type": "message", "text": "hi", "extra": json.loads("[" * 500 + "]" * 500)})
    await client.ws.send_str(deep_message)  # legal depth in an ignored field: answered normally
    assert (await client.recv())["type"] in ("status", "delta", "reply")
    reply, _ = await client.ask("still here?")
    assert reply["type"] == "reply"


async def _raw_upgrade(port: int, authorization: bytes) -> int:
    """The status line of an upgrade whose Authorization header carries raw (non-ASCII) bytes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                 b"Authorization: " % port + authorization + b"\r\n\r\n")
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return int(line.split()[1])


@pytest.mark.parametrize("token", ["t\u00f6k\u00e9n", "\u0441\u0435\u043a\u0440\u0435\u0442", "\U0001f511" * 8,
                                   "\ud800", TOKEN[:-1] + "\u00e9"])
async def test_odd_tokens_are_refused_never_a_crash(
    make_gateway: GatewayFactory, ws_connect: Any, token: str
) -> None:
    gw = await make_gateway(server={"token": TOKEN})
    assert gw.port is not None
    # in the Authorization header (raw bytes: UTF-8, and Latin-1 as some clients send it)
    for raw in (token.encode("utf-8", "surrogatepass"), token.encode("latin-1", "replace")):
        assert await _raw_upgrade(gw.port, b"Bearer " + raw) == 401
    # in the auth frame (JSON may even carry a lone surrogate)
    client: WSClient = await ws_connect(gw)
    await client.ws.send_str(json.dumps({"type": "auth", "token": token, "client_id": "x"}))
    frame = await client.recv()
    assert frame["type"] == "error" and frame["code"] == "unauthorized"
    await client.ws.receive(timeout=5)
    assert client.ws.close_code == 4401
    # and the right token still works
    ok: WSClient = await ws_connect(gw, headers={"Authorization": f"Bearer {TOKEN}"})
    assert (await ok.hello("y"))["type"] == "ready"


async def test_no_stale_connection_after_a_second_hello(make_gateway: GatewayFactory, ws_connect: Any) -> None:
    gw = await make_gateway()
    adapter: Any = gw.adapters["websocket"]
    client: WSClient = await ws_connect(gw)
    assert (await client.hello("phone"))["type"] == "ready"
    again = await client.hello("tablet")
    assert again["type"] == "error" and again["code"] == "already_identified"
    assert set(adapter.connections) == {"phone"}
    # a proactive message reaches the live connection
    await gw.send(ConversationAddress(channel="websocket", conversation_id="phone"), Reply(text="ping"))
    assert (await client.recv())["text"] == "ping"
    await client.ws.close()
    await wait_for(lambda: not adapter.connections)
    for who in ("phone", "tablet"):
        with pytest.raises(LookupError):
            await gw.send(ConversationAddress(channel="websocket", conversation_id=who), Reply(text="reminder"))


async def test_send_to_closed_sockets_raises_lookup_error(make_gateway: GatewayFactory, ws_connect: Any) -> None:
    """Between a socket closing and its handler unregistering it, a send must not count as delivered."""
    gw = await make_gateway()
    adapter: Any = gw.adapters["websocket"]
    client: WSClient = await ws_connect(gw)
    await client.hello("phone")
    (conn,) = adapter.connections["phone"]
    await conn.ws.close()  # closed on the server side; the handler's cleanup has not run yet
    with pytest.raises(LookupError):
        await gw.send(ConversationAddress(channel="websocket", conversation_id="phone"), Reply(text="reminder"))


async def test_queued_messages_are_dropped_when_the_client_leaves(
    make_gateway: GatewayFactory, ws_connect: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    fake_anthropic.default_delay_s = 1.0
    client: WSClient = await ws_connect(gw)
    await client.hello("leaver")
    for i in range(5):
        await client.ws.send_json({"type": "message", "id": f"m{i}", "text": f"message {i}"})
    await wait_for(lambda: len(fake_anthropic.turn_requests()) == 1)  # the first turn is running
    await client.ws.close()
    await asyncio.sleep(2.5)  # long enough for two more turns, had they run
    await gw.settle()
    assert len(fake_anthropic.turn_requests()) == 1
    # the turn that was running finished and was kept
    rows = select_rows(gw.state, "SELECT role, content FROM turns ORDER BY seq")
    assert [(r["role"], r["content"]) for r in rows][:1] == [("user", "message 0")]
    assert [r["role"] for r in rows] == ["user", "assistant"]



async def test_oversize_frame_is_answered_and_the_connection_stays(
    make_gateway: GatewayFactory, ws_connect: Any
) -> None:
    """Issue 14: a 70 KB message silently dropped the connection (1009) and the page lost its draft."""
    gw = await make_gateway()  # the default server.max_frame_bytes, 64 KiB
    limit = gw.config.server.max_frame_bytes
    client: WSClient = await ws_connect(gw)
    await client.hello("big")
    await client.ws.send_str(json.dumps({"type": "message", "id": "m-70k", "text": "x" * 70_000}))
    frame = await client.recv()
    assert frame == {"type": "error", "code": "too_large", "id": "m-70k", "limit": limit,
                     "message": f"frames are limited to {limit} bytes"}
    # multi-byte text is measured in bytes, as the limit is: 20,000 characters of 4 bytes each
    await client.ws.send_str(json.dumps({"type": "message", "id": 7, "text": "\U0001f600" * 20_000},
                                        ensure_ascii=False))
    assert (await client.recv())["code"] == "too_large"
    await client.ws.send_str("x" * (limit + 1))  # not even JSON: answered without an id
    assert (await client.recv()) == {"type": "error", "code": "too_large", "limit": limit,
                                     "message": f"frames are limited to {limit} bytes"}
    assert not client.ws.closed
    reply, _ = await client.ask("still here?")
    assert reply["type"] == "reply" and "still here?" in reply["text"]
    assert select_rows(gw.state, "SELECT * FROM turns WHERE content LIKE 'xxx%'") == []
