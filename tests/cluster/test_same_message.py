"""Two clustered gateways in one process (one Redis, one state, one data directory): the same platform
message reaching both (a chat platform connected from every node, a redelivery) is answered once."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from gateway.bus.server import EmbeddedRedis
from gateway.testing import GatewayFactory, message
from tests.storage import select_rows

# The memory stages are beside the point here: without them no embedder loads (a faster start).
MEMORY_STAGES = ["plugins.memory_index", "plugins.recall", "plugins.profile", "plugins.people", "plugins.compaction",
                 "plugins.memory_writer", "plugins.sleep_cycle", "plugins.distill", "plugins.retention",
                 "plugins.known_facts", "plugins.tools"]


async def test_one_message_on_two_nodes_is_one_turn(tmp_path: Path, redis_server: EmbeddedRedis,
                                                    kith_gateway: GatewayFactory) -> None:
    # (redis_server first: the gateways close before the server stops)
    nodes = [await kith_gateway(bus={"url": redis_server.url}, cluster={"enabled": True, "node_id": name},
                                plugins={"deny": MEMORY_STAGES})
             for name in ("a", "b")]
    base = message("hello from both", account="ada")
    for i in range(5):
        same = dataclasses.replace(base, text=f"hello {i}", message_id=f"m{i}")
        replies = await asyncio.gather(*(gw.handle_inbound(same) for gw in nodes))
        assert sum(r is not None for r in replies) == 1, replies
    rows = select_rows(nodes[0].state, "SELECT turn_id, role FROM turns")
    assert sorted(r[1] for r in rows) == ["assistant"] * 5 + ["user"] * 5
