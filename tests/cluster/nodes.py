"""Two real ``kith run`` nodes on one Redis, one PostgreSQL database and one data directory.

``run_cluster`` starts them, drives turns from WebSocket clients spread over both (two clients per
person, on different nodes, so one person's turns really do arrive at two nodes at once), SIGKILLs
the scheduler lease's holder now and then (restarting it each time), enqueues probe jobs all along,
stops both nodes cleanly, and returns what the checks need. The checks live in ``test_nodes.py``.

A client whose node dies mid-turn reconnects (to the other node while its own is down) and sends
the same message id again: a redelivery. The dedupe key then says whether the first attempt had
completed (``dropped``: the turn is stored and must not be run twice) or not (it runs now).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aredis

from gateway.bus import JobBus
from gateway.bus.server import EmbeddedRedis
from gateway.cluster.lease import Grant, Lease
from gateway.configread import parse_config
from gateway.state import open_configured
from gateway.state.delivery import OutboxEntry
from tests.cluster.probe_jobs import DONE
from tests.kith_run import Daemon, free_port, write_config

LEASE_TTL_S = 2.0
TURN_RE = re.compile(r"<!-- kith:turn v=\S+ id=([0-9a-f]+) ")


@dataclass
class Node:
    name: str
    daemon: Daemon
    port: int
    starts: int = 1


@dataclass
class Outcome:
    turns: dict[tuple[int, int], str] = field(default_factory=dict)  # (client, k) -> turn id ("" = dropped)
    redelivered: int = 0  # messages sent again after their node died
    kills: list[tuple[float, str]] = field(default_factory=list)  # (wall time, node) of each SIGKILL
    grants: list[Grant] = field(default_factory=list)
    probes: set[str] = field(default_factory=set)
    probes_done: set[str] = field(default_factory=set)
    dead_letters: int = 0
    data_dir: Path = Path()
    state_url: str = ""
    persons: int = 0
    reminders: dict[str, str] = field(default_factory=dict)  # user id -> reminder text planted by hand


def _config(tmp: Path, name: str, port: int, redis_url: str, state_url: str) -> Path:
    return write_config(
        tmp / f"{name}.yaml", tmp / "data", port,
        log_level="INFO",
        state={"url": state_url},
        bus={"url": redis_url, "claim_idle_ms": 1500, "retry_backoff_s": 0.1, "retry_backoff_max_s": 1.0,
             "shutdown_grace_s": 5},
        cluster={"enabled": True, "node_id": name, "lease_ttl_s": LEASE_TTL_S, "lock_ttl_s": 10},
        plugins={"entry_points": False, "modules": ["tests.cluster.probe_jobs"]},
        # Each client is a person of its own: on loopback they would all sign in as the one local owner
        # (server.local_owner, docs/web.md#one-owner) and share one person's rate limit and turn lock.
        server={"host": "127.0.0.1", "port": port, "local_owner": False},
    )


class Client:
    """One WebSocket client (``client_id`` = its person), moving to the other node when its own dies."""

    def __init__(self, index: int, person: str, nodes: list[Node], http: aiohttp.ClientSession) -> None:
        self.index, self.person, self.nodes, self.http = index, person, nodes, http
        self.prefer = index % len(nodes)
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.user_id = ""

    async def _connect(self) -> aiohttp.ClientWebSocketResponse:
        for offset in range(len(self.nodes)):
            node = self.nodes[(self.prefer + offset) % len(self.nodes)]
            if not node.daemon.alive():
                continue
            try:
                ws = await self.http.ws_connect(f"http://127.0.0.1:{node.port}/ws",
                                                timeout=aiohttp.ClientWSTimeout(ws_close=2))
                await ws.send_json({"type": "hello", "client_id": self.person, "name": self.person})
                ready = await self._frame(ws, lambda f: f["type"] in ("ready", "error"), 20)
                if ready["type"] == "ready":
                    self.user_id = str(ready.get("user_id", ""))
                    return ws
                await ws.close()
            except (aiohttp.ClientError, OSError, TimeoutError, ConnectionError):
                continue
        raise ConnectionError("no node answers")

    @staticmethod
    async def _frame(ws: aiohttp.ClientWebSocketResponse, want: Any, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            msg = await ws.receive(timeout=max(deadline - time.monotonic(), 0.01))
            if msg.type != aiohttp.WSMsgType.TEXT:
                raise ConnectionError(f"socket {msg.type}")
            frame = json.loads(msg.data)
            if frame.get("type") == "state":  # pushed to every client of the person: not an answer
                continue
            if want(frame):
                return frame

    async def turn(self, k: int, out: Outcome) -> None:
        ref = f"c{self.index}-k{k}"  # message ids are per person: unique across their clients
        text = f"client {self.index} turn {k}"
        # Bounded by time, not attempts: after a kill the dead node's turn lock on this person lives
        # for cluster.lock_ttl_s, and the node now serving answers "busy" until it is free.
        deadline, last_error = time.monotonic() + 240, ""
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"client {self.index} turn {k}: no answer in 240 s (last error: {last_error})")
            try:
                if self.ws is None or self.ws.closed:
                    self.ws = await self._connect()
                await self.ws.send_json({"type": "message", "id": ref, "text": text})
                frame = await self._frame(self.ws, lambda f: f.get("id") == ref and f["type"] in ("reply", "error"),
                                          60)
            except (aiohttp.ClientError, OSError, TimeoutError, ConnectionError):
                if self.ws is not None:
                    with contextlib.suppress(Exception):
                        await self.ws.close()
                self.ws = None
                self.prefer = (self.prefer + 1) % len(self.nodes)
                out.redelivered += 1
                await asyncio.sleep(0.1)
                continue
            if frame["type"] == "error":  # busy / rate limited: try again shortly
                last_error = str(frame.get("text") or frame.get("message") or frame)
                await asyncio.sleep(0.1)
                continue
            out.turns[(self.index, k)] = "" if frame.get("dropped") else str(frame.get("turn_id", ""))
            return

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


async def _holder(lease: Lease) -> str | None:
    current = await lease.current()
    return current[0].split("/", 1)[0] if current else None


async def run_cluster(tmp: Path, state_url: str, *, clients: int, turns: int, kills: int,
                      probes: int, reminders: int = 0) -> Outcome:
    """Run the scenario; nodes and the Redis server are stopped however it ends."""
    out = Outcome(data_dir=tmp / "data", state_url=state_url, persons=clients // 2)
    server = EmbeddedRedis(tmp / "redis-home")
    await server.start()
    nodes: list[Node] = []
    http = aiohttp.ClientSession()
    redis = aredis.Redis.from_url(server.url, decode_responses=True)
    bus = JobBus(parse_config({"data_dir": str(tmp / "probe"), "bus": {"url": server.url}}, env={}), own_server=False)
    try:
        await bus.start()
        for name in ("n1", "n2"):
            port = free_port()
            daemon = Daemon(_config(tmp, name, port, server.url, state_url), tmp / f"{name}.log")
            await asyncio.to_thread(daemon.start, 180)
            nodes.append(Node(name, daemon, port))
        lease = Lease(redis, "scheduler", LEASE_TTL_S, holder="test")
        deadline = time.monotonic() + 30
        while await _holder(lease) is None:  # one of them takes the lease within its first round
            assert time.monotonic() < deadline, "no node took the scheduler lease"
            await asyncio.sleep(0.05)

        pool = [Client(i, f"p{i // 2}", nodes, http) for i in range(clients)]
        per_client = turns // clients
        progress = {"turns": 0}
        advanced = asyncio.Event()

        async def drive(c: Client) -> None:
            for k in range(per_client):
                await c.turn(k, out)
                progress["turns"] += 1
                advanced.set()

        async def produce() -> None:
            for i in range(probes):
                job_id = f"probe-{i}"
                out.probes.add(job_id)
                await bus.enqueue("cluster.probe", {"sleep": 0.2}, job_id=job_id)
                await asyncio.sleep(0.02)

        async def kill_leaders() -> None:
            for n in range(kills):
                target = (n + 1) * clients * per_client // (kills + 1)
                while progress["turns"] < target:
                    advanced.clear()
                    await advanced.wait()
                name = await _holder(lease)
                node = next((x for x in nodes if x.name == name), nodes[0])
                node.daemon.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
                out.kills.append((time.time(), node.name))
                await asyncio.to_thread(node.daemon.proc.wait, 30)  # type: ignore[union-attr]
                if node.daemon.proc is not None and node.daemon.proc.stdout is not None:
                    node.daemon.proc.stdout.close()
                await asyncio.to_thread(node.daemon.start, 180)  # same port, same node id
                node.starts += 1

        async def plant() -> None:
            # Hand-written reminders (the schedule's file watcher arms them) due at the next minute
            # but one, so they fire while turns run and nodes are being killed.
            while any(not c.user_id for c in pool[: reminders * 2 : 2]):
                advanced.clear()
                await advanced.wait()
            due = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=2)
            for n, c in enumerate(pool[: reminders * 2 : 2]):
                text = f"ping {n}"
                home = out.data_dir / "users" / c.user_id
                home.mkdir(parents=True, exist_ok=True)
                (home / "REMINDERS.md").write_text(f"# Reminders\n\n- [ ] {due:%Y-%m-%d %H:%M} (UTC) {text}\n")
                out.reminders[c.user_id] = text

        drivers = [asyncio.create_task(drive(c)) for c in pool]
        extra = [asyncio.create_task(produce()), asyncio.create_task(kill_leaders())]
        if reminders:
            extra.append(asyncio.create_task(plant()))
        await asyncio.gather(*drivers, *extra)
        for c in pool:
            await c.close()
        deadline = time.monotonic() + 120
        while await redis.scard(DONE) < probes:  # claimed after a kill within ~claim_idle_ms
            if time.monotonic() >= deadline:
                busy = [q for q in await bus.status() if q.pending or q.in_flight or q.delayed]
                raise AssertionError(f"probe jobs lost: {probes - await redis.scard(DONE)} never ran; queues: {busy}")
            await asyncio.sleep(0.1)
        if out.reminders:
            deadline = time.monotonic() + 240
            while not all((await asyncio.to_thread(reminder_rows, out)).values()):
                assert time.monotonic() < deadline, "a reminder never reached the outbox"
                await asyncio.sleep(0.5)
        # A killed holder's lease passes on only a TTL after its last renewal: when the turns after
        # the last kill finish sooner than that, wait for the failover instead of reading a history
        # that cannot hold it yet (bounded: a failover that never comes still fails the test).
        deadline = time.monotonic() + 60
        while out.kills and time.monotonic() < deadline:
            history = await lease.history()
            if any(g.acquired_ms / 1000 > out.kills[-1][0] for g in history):
                break
            await asyncio.sleep(0.2)
        out.probes_done = set(await redis.smembers(DONE))
        out.dead_letters = len(await bus.dead())
        out.grants = await lease.history()
    finally:
        for node in nodes:
            await asyncio.to_thread(node.daemon.stop, 60)
        await http.close()
        await bus.close()
        await redis.aclose()
        await server.stop()
    return out


def _reminder_rows(out: Outcome, user_id: str, text: str) -> list[OutboxEntry]:
    state = open_configured(out.data_dir, out.state_url)
    try:
        return [e for e in state.outbox.list_for(user_id, limit=1000) if e.kind == "reminder" and text in e.text]
    finally:
        state.close()


def reminder_rows(out: Outcome) -> dict[str, list[OutboxEntry]]:
    return {uid: _reminder_rows(out, uid, text) for uid, text in out.reminders.items()}


def session_log_ids(data_dir: Path) -> dict[str, int]:
    """How often each turn id appears in the Markdown session logs of every person."""
    counts: dict[str, int] = {}
    for path in (data_dir / "users").glob("*/sessions/*.md"):
        for turn_id in TURN_RE.findall(path.read_text()):
            counts[turn_id] = counts.get(turn_id, 0) + 1
    return counts


def failover_delays(out: Outcome) -> list[float]:
    """Seconds from each SIGKILL of the holder to the next grant (server clock = this machine's)."""
    delays = []
    for at, _ in out.kills:
        later = [g.acquired_ms / 1000 for g in out.grants if g.acquired_ms / 1000 > at]
        if later:
            delays.append(round(min(later) - at, 3))
    return delays


def log_of(tmp: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(tmp.glob("n*.log")) if p.exists())
