"""Adapter supervision: each adapter in its own named task, restarted with backoff.

Network errors and a silent poller are retried with capped, jittered exponential backoff; an
``AdapterAuthError`` stops only that adapter with a clear message while the others keep serving.
Adapters are deliberately not in a TaskGroup: one failing must never cancel the rest.

A restart never cuts off a turn: the supervisor tells the turns in flight (``turns``,
gateway/turn/inflight.py) before it stops an adapter for a restart and when a run is serving again,
so turns whose handler the restart cancels complete and their replies arrive through the new run.
Shutdown (``stop``) ends them as before, within a bound.

An adapter's ``stop()`` is bounded too (``STOP_WAIT_S``), at a restart and at shutdown, and so is a
run that does not end when cancelled: adapters close connections to peers that may never answer,
and one adapter's slow goodbye must hold up neither its own restart nor the daemon's exit. The
adapter that overran is named in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.adapter import Adapter, AdapterAuthError, AdapterStalled
from gateway.turn.inflight import TurnsInFlight

log = logging.getLogger("kith.supervisor")

STOP_WAIT_S = 3.0  # for one adapter's stop(); a second, shorter grace follows at shutdown


class AdapterState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(slots=True)
class Supervised:
    adapter: Adapter
    state: AdapterState = AdapterState.STARTING
    restarts: int = 0
    last_error: str = ""
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Backoff:
    """Exponential backoff with full jitter, reset after a run that lasted ``healthy_after_s``."""

    def __init__(self, base: float = 1.0, cap: float = 60.0) -> None:
        self.base, self.cap, self.attempt = base, cap, 0

    def next_delay(self) -> float:
        self.attempt += 1
        return random.uniform(self.base / 2, min(self.cap, self.base * 2 ** (self.attempt - 1)))

    def reset(self) -> None:
        self.attempt = 0


class Supervisor:
    def __init__(self, *, base_delay: float = 1.0, max_delay: float = 60.0, watchdog_interval: float = 5.0,
                 healthy_after_s: float = 30.0, stop_wait_s: float = STOP_WAIT_S) -> None:
        self.items: dict[str, Supervised] = {}
        self.base_delay, self.max_delay = base_delay, max_delay
        self.watchdog_interval = watchdog_interval
        self.healthy_after_s = healthy_after_s
        self.stop_wait_s = stop_wait_s
        self._watchdog: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.turns = TurnsInFlight()  # the gateway's handle_inbound runs every turn through it

    def start(self, adapters: dict[str, Adapter]) -> None:
        for name, adapter in adapters.items():
            item = Supervised(adapter=adapter)
            self.items[name] = item
            item.task = asyncio.create_task(self._loop(name, item), name=f"adapter:{name}")
        self._watchdog = asyncio.create_task(self._watch(), name="adapter-watchdog")

    async def _loop(self, name: str, item: Supervised) -> None:
        backoff = Backoff(self.base_delay, self.max_delay)

        def connected() -> None:
            if item.state is AdapterState.STARTING:
                item.state = AdapterState.RUNNING
                self.turns.serving(name)

        while True:
            item.state = AdapterState.STARTING
            item.adapter.on_connected = connected
            item.adapter.touch()
            started = time.monotonic()
            try:
                await item.adapter.run()
                item.last_error = "run() returned"
                log.warning("adapter %s stopped serving; restarting", name)
            except asyncio.CancelledError:
                item.state = AdapterState.STOPPED
                await self._stop_adapter(name, item)
                raise
            except AdapterAuthError as exc:
                item.state = AdapterState.FAILED
                item.last_error = f"authentication failed: {exc}"
                log.error("adapter %s: authentication failed (%s); this adapter is stopped, "
                          "the others keep serving. Fix its token and restart kith.", name, exc)
                await self._stop_adapter(name, item)
                return
            except Exception as exc:
                item.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("adapter %s failed: %s; will restart", name, item.last_error)
            self.turns.restarting(name)  # before stop(): the turns it cancels go on
            await self._stop_adapter(name, item)
            if time.monotonic() - started > self.healthy_after_s:
                backoff.reset()
            item.state = AdapterState.BACKOFF
            item.restarts += 1
            await asyncio.sleep(backoff.next_delay())

    async def _stop_adapter(self, name: str, item: Supervised) -> None:
        # wait_for, not asyncio.timeout: this also runs in a task already cancelled (a restart, or
        # shutdown), and wait_for's own inner task does not depend on that task's cancel count.
        try:
            await asyncio.wait_for(item.adapter.stop(), self.stop_wait_s)
        except TimeoutError:
            log.warning("adapter %s did not stop within %.0f s; leaving its connection behind", name,
                        self.stop_wait_s)
        except Exception as exc:
            log.warning("adapter %s: stop() failed: %s: %s", name, type(exc).__name__, exc)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.watchdog_interval)
            now = time.monotonic()
            for name, item in self.items.items():
                limit = item.adapter.stall_after_s
                # A run stuck connecting (STARTING) is as dead as one that stopped receiving.
                if (limit and item.state in (AdapterState.RUNNING, AdapterState.STARTING) and item.task is not None
                        and now - item.adapter.last_activity > limit):
                    log.warning("adapter %s received nothing for %.0fs; restarting it", name, limit)
                    self._restart(name, item, AdapterStalled(f"no activity for {limit:.0f}s"))

    def _restart(self, name: str, item: Supervised, reason: Exception) -> None:
        # (channels, issue 7) Leave RUNNING at once: the old run may take seconds to shut down (a
        # stalled HTTP poll), and a second watchdog pass must not start another restart meanwhile,
        # or two pollers end up sharing one bot token.
        item.state = AdapterState.BACKOFF
        item.adapter.touch()
        self.turns.restarting(name)  # before the cancel, whose stop() cancels the adapter's turn handlers
        if item.task is not None:
            item.task.cancel()
        item.last_error = str(reason)
        item.restarts += 1

        async def again() -> None:
            if item.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await item.task
            if self._stopping:  # shutdown cancelled this restart while the old run was ending
                return
            item.task = asyncio.create_task(self._loop(name, item), name=f"adapter:{name}")

        restart = asyncio.create_task(again(), name=f"adapter-restart:{name}")
        self._pending.add(restart)
        restart.add_done_callback(self._pending.discard)

    def health(self) -> dict[str, Any]:
        return {
            name: {"state": item.state.value, "restarts": item.restarts, "last_error": item.last_error,
                   **item.adapter.health()}
            for name, item in self.items.items()
        }

    async def stop(self) -> None:
        # Shutdown: a turn handler cancelled from here on cancels its turn, as it always did.
        self.turns.closing = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        # (channels, issue 7) A restart in flight would start a fresh run after shutdown: cancel it.
        self._stopping = True
        for pending in self._pending:
            pending.cancel()
        runs = [i.task for i in self.items.values() if i.task is not None]
        for run in runs:
            run.cancel()
        ending = {*self._pending, *runs}
        if ending:
            # Each run bounds its adapter's stop(); this bound is for a run or restart that does not
            # end when cancelled. Whatever is still there after a second cancel is left behind.
            bound = self.stop_wait_s + 1.0
            _, late = await asyncio.wait(ending, timeout=bound)
            for task in late:
                log.warning("%s did not end within %.0f s of shutdown; cancelling it again", task.get_name(), bound)
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=1.0)
        for item in self.items.values():
            item.state = AdapterState.STOPPED
        await self.turns.close()  # turns a restart left without a handler, replies waiting for their adapter
