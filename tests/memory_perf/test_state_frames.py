"""State frames after a turn go to the person's open clients, found without a query per client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.testing import GatewayFactory


async def test_state_push_matches_clients_without_looking_each_up(
    make_gateway: GatewayFactory, ws_connect: Callable[..., Awaitable[Any]]
) -> None:
    gw = await make_gateway()
    clients = [await ws_connect(gw) for _ in range(4)]
    for i, c in enumerate(clients):
        assert (await c.hello(f"client-{i}"))["type"] == "ready"
    lookups: list[str] = []
    lookup = gw.identities.lookup

    def counted(channel: str, account: str) -> Any:
        lookups.append(account)
        return lookup(channel, account)

    gw.identities.lookup = counted  # type: ignore[method-assign]
    reply, _ = await clients[0].ask("hello")
    assert reply["type"] == "reply"
    # the speaker's own client at most, never each of the others
    assert set(lookups) <= {"client-0"}

    # a merge moves the merged person's open clients to the surviving person
    adapter = gw.adapters["websocket"]
    ids = {cid: next(iter(conns)).user_id for cid, conns in adapter.connections.items()}
    await gw.merge_users(into=ids["client-1"], source=ids["client-2"])
    assert next(iter(adapter.connections["client-2"])).user_id == ids["client-1"]
    assert next(iter(adapter.connections["client-3"])).user_id == ids["client-3"]
