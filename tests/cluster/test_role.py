"""The gateway's side of a cluster: leader work follows the lease, config and data-dir rules."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis.asyncio as aredis

from gateway.bus.server import EmbeddedRedis
from gateway.cli.run import StartupError, prepare
from gateway.cluster.role import Cluster
from gateway.config import Config, ConfigError
from gateway.configread import parse_config
from gateway.memory.files import store as memory_store


def clustered(tmp: Path, url: str, node: str, **cluster: object) -> Config:
    return parse_config({"data_dir": str(tmp / "data"), "bus": {"url": url}, "server": {"port": 0},
                         "cluster": {"enabled": True, "node_id": node, **cluster}}, env={})


async def until(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_leader_work_moves_and_stops_when_the_lease_is_lost(tmp_path: Path, redis_server: EmbeddedRedis,
                                                                  redis: aredis.Redis) -> None:
    running: dict[str, bool] = {}
    nodes = {name: Cluster(clustered(tmp_path, redis_server.url, name, lease_ttl_s=1)) for name in ("a", "b")}
    for name, node in nodes.items():
        await node.start(redis, lead=True)
        node.on_leader(lambda n=name: running.__setitem__(n, True), lambda n=name: running.__setitem__(n, False))
    try:
        await until(lambda: sum(running.values()) == 1)
        first = next(n for n, on in running.items() if on)
        other = "b" if first == "a" else "a"
        assert nodes[first].is_leader() and not nodes[other].is_leader()
        assert nodes[first].token is not None
        # Someone else holds the key now (as after a partition): the holder's renewal is refused and its
        # leader work stops at once; the other node takes the lease once the intruder's grant expires.
        await redis.set("kith:lease:scheduler", "intruder|999", px=1500)
        await until(lambda: not running[first])
        assert not nodes[first].is_leader()
        await until(lambda: any(running.values()), timeout=15)
        assert sum(running.values()) == 1
    finally:
        for node in nodes.values():
            await node.close()
    assert not any(running.values())  # a clean stop ends leader work and releases the lease
    assert await redis.get("kith:lease:scheduler") is None
    assert memory_store.cross_host_lock() is None


async def test_one_node_leads_at_once_without_redis() -> None:
    node = Cluster(parse_config({}, env={}))
    await node.start(None, lead=True)
    started: list[int] = []
    node.on_leader(lambda: started.append(1))
    assert started == [1] and node.is_leader() and node.token == 0
    async with node.turn_lock("user:x") as held:
        assert held is None  # one node: no lock, no round trip
    await node.close()


def test_cluster_needs_the_shared_redis() -> None:
    with pytest.raises(ConfigError, match=r"cluster\.enabled"):
        parse_config({"cluster": {"enabled": True}}, env={})


def test_each_node_locks_only_its_own_directory(tmp_path: Path) -> None:
    url = "redis://127.0.0.1:1/0"  # never contacted: prepare() only takes the file lock
    a = prepare(clustered(tmp_path, url, "a"))
    b = prepare(clustered(tmp_path, url, "b"))
    try:
        assert (tmp_path / "data" / "nodes" / "a" / "daemon.lock").exists()
        with pytest.raises(StartupError, match=r"cluster\.node_id"):
            prepare(clustered(tmp_path, url, "a"))
    finally:
        a.close()
        b.close()


async def test_a_turn_runs_without_the_lock_when_redis_is_gone(tmp_path: Path) -> None:
    node = Cluster(clustered(tmp_path, f"unix://{tmp_path}/gone.sock", "a"))
    gone = aredis.Redis.from_url(f"unix://{tmp_path}/gone.sock")
    await node.start(gone, lead=False)
    try:
        async with node.turn_lock("user:x") as held:
            assert held is None  # answered unserialised rather than refused
    finally:
        await node.close()
        await gone.aclose()
