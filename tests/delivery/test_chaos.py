"""Chaos (``pytest -m chaos -s tests/delivery/test_chaos.py``): 1,000 deliveries to 20 web-chat clients,
due over the span of 50 SIGKILLs of the ``kith run`` daemon (and its Redis), so the kills fall among
them (at least half of them must: the run checks it).

Each client reconnects at once after every kill and, like the web chat, acknowledges every proactive
frame and shows a ``delivery_id`` once (docs/protocol.md#acknowledging-proactive-messages); it counts
the ``chaos <id>`` messages it shows, live (``proactive``) or replayed on its next connection
(``missed``), and every frame it receives. Afterwards every delivery must have arrived (0 lost: a frame
written just before a kill is not acknowledged and is sent again), and the copies shown beyond the
first are within the documented bound: at most one per delivery per crash between its send and its
record (docs/proactive.md#delivery-guarantees), so never more duplicates in total than crashes.
Figures are printed; docs/proactive.md records a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.state import open_state
from tests.durability.test_daemon_durability import free_port

pytestmark = pytest.mark.chaos
ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 20
DELIVERIES = 1000
KILLS = 50
SPREAD_S = 150.0


class Daemon:
    """``kith run`` in its own process group; a kill takes the whole group (its Redis too)."""

    def __init__(self, config: Path, env: dict[str, str], log: Path) -> None:
        self.config, self.env, self.log = config, env, log
        self.proc: asyncio.subprocess.Process | None = None
        self.groups: list[int] = []

    def _log_file(self) -> Any:
        return open(self.log, "ab")

    async def start(self) -> None:
        with self._log_file() as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.cli.main", "-c", str(self.config), "run", cwd=ROOT, env=self.env,
                stdout=asyncio.subprocess.PIPE, stderr=err, start_new_session=True)  # fmt: skip
        self.groups.append(self.proc.pid)
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
            if not line:
                raise AssertionError(f"kith run exited at start: see {self.log}")
            if b"kith is running" in line:
                return

    async def kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        self.proc = None

    async def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.proc.wait(), 60)
            self.proc = None

    def cleanup(self) -> None:
        for pgid in self.groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


async def client(port: int, client_id: str, received: Counter[str], frames: Counter[str], stop: asyncio.Event,
                 ready: asyncio.Event) -> None:  # fmt: skip
    """A web-chat tab that reconnects as soon as it can, counting every chaos message it is shown
    (``received``) and every frame of one (``frames``: a resent one it had shown is not shown again)."""
    shown: set[str] = set()
    while not stop.is_set():
        try:
            async with aiohttp.ClientSession() as http, http.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
                await ws.send_json({"type": "hello", "client_id": client_id, "acks": True})
                while not stop.is_set():
                    msg = await ws.receive(timeout=1.0)
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        break
                    frame = json.loads(msg.data)
                    if frame["type"] == "ready":
                        ready.set()
                    elif frame["type"] == "reply" and frame.get("proactive") and frame["text"].startswith("chaos "):
                        frames[frame["text"][6:]] += 1
                        delivery = frame.get("delivery_id")
                        if delivery not in shown:
                            received[frame["text"][6:]] += 1
                        if isinstance(delivery, str):
                            shown.add(delivery)
                            await ws.send_json({"type": "ack", "delivery_id": delivery})
        except (TimeoutError, aiohttp.ClientError, ConnectionError, OSError):
            pass
        await asyncio.sleep(0.05)


def outbox(data: Path) -> dict[str, int]:
    """The outbox's rows by status, through kith's own state (the daemon may hold the file too)."""
    state = open_state(data / "state.sqlite")
    try:
        return state.outbox.counts()
    finally:
        state.close()


async def test_deliveries_survive_50_sigkills(tmp_path: Path) -> None:
    began = time.time()
    port = free_port()
    cfg = {"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"},
           "server": {"host": "127.0.0.1", "port": port,
                      "rate_limit": {"new_users_per_minute": 1000, "new_users_burst": 1000,
                                     "global_new_users_per_minute": 1000, "global_new_users_burst": 1000}},
           "plugins": {"entry_points": False, "modules": ["tests.delivery.chaos_plugin"]}}  # fmt: skip
    config = tmp_path / "kith.yaml"
    config.write_text(json.dumps(cfg))
    plan_path = tmp_path / "plan.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KITH_DELIVERY_PLAN": str(plan_path)}
    daemon = Daemon(config, env, tmp_path / "daemon.log")
    rng = random.Random(16)
    received: Counter[str] = Counter()
    frames: Counter[str] = Counter()
    stop = asyncio.Event()
    clients: list[asyncio.Task[None]] = []
    try:
        started = time.monotonic()
        await daemon.start()
        # Deliveries fall due over the whole span of the kills, not only its first minutes: a start
        # takes seconds on a loaded machine (10 s with load 10), so 50 kill cycles take minutes, and
        # with a fixed 150 s most kills came after every delivery had been sent.
        cycle_s = time.monotonic() - started + 1.15  # a start, then 0.3-2 s up
        spread_s = max(SPREAD_S, 0.9 * KILLS * cycle_s)
        readies = [asyncio.Event() for _ in range(CLIENTS)]
        clients = [asyncio.create_task(client(port, f"chaos-{n}", received, frames, stop, readies[n]))
                   for n in range(CLIENTS)]  # fmt: skip
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)  # every person exists
        start = time.time() + 5
        plan = [{"id": f"d{i:04d}", "client": f"chaos-{i % CLIENTS}", "due": start + rng.uniform(0, spread_s)}
                for i in range(DELIVERIES)]  # fmt: skip
        plan_path.write_text(json.dumps(plan))
        # The plan is armed by the next start, like a scheduler re-arming its timers: this first kill
        # comes before any delivery and is not one of the KILLS.
        await daemon.kill()
        kill_times: list[float] = []
        while len(kill_times) < KILLS:
            await daemon.start()
            await asyncio.sleep(rng.uniform(0.3, 2.0))
            await daemon.kill()
            kill_times.append(time.time())
        kills = len(kill_times)
        await daemon.start()
        last_due = max(p["due"] for p in plan)
        for _ in range(int(max(0.0, last_due - time.time())) + 120):
            sent = (await asyncio.to_thread(outbox, tmp_path / "data")).get("sent", 0)
            if len(received) >= DELIVERIES and sent >= DELIVERIES:
                break
            await asyncio.sleep(1)
        await asyncio.sleep(2)  # a copy still on its way is counted
        stop.set()
        await asyncio.gather(*clients, return_exceptions=True)
        await daemon.stop()
    finally:
        stop.set()
        for task in clients:
            task.cancel()
        daemon.cleanup()
    ids = [p["id"] for p in plan]
    lost = [i for i in ids if received[i] == 0]
    duplicates = sum(max(0, received[i] - 1) for i in ids)
    statuses = outbox(tmp_path / "data")
    first_due = min(p["due"] for p in plan)
    amid = sum(1 for t in kill_times if first_due <= t <= last_due)  # with deliveries falling due around it
    took = time.time() - began
    print(f"\ndelivery chaos: {DELIVERIES} deliveries over {spread_s:.0f} s to {CLIENTS} web clients, "
          f"{kills} SIGKILLs of the daemon ({amid} while deliveries fell due): lost {len(lost)}, "
          f"duplicates {duplicates} "
          f"(bound: at most one per delivery per crash, {kills} in total), most copies of one "
          f"{max(received[i] for i in ids)}, frames sent again (not shown twice) "
          f"{sum(frames.values()) - sum(received.values())}, outbox {statuses}, {took:.0f} s")  # fmt: skip
    assert not lost, f"lost: {lost[:20]}"
    assert duplicates <= kills
    assert amid >= KILLS // 2, f"only {amid} kills fell among the deliveries"
    assert statuses.get("sent", 0) == DELIVERIES
