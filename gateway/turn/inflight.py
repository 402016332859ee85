"""Turns in flight: the gateway owns each turn's task, the adapter's handler only waits for it.

The supervisor restarts an adapter that stopped receiving or whose run failed, and an adapter's
``stop()`` cancels the tasks of the messages it is answering. When the turn ran inside that task, a
restart cut the model call off and the person's message went unanswered, maybe unstored. So
``handle_inbound`` runs the turn in a task of its own (``turn:<channel>:<turn id>``) and the handler
awaits it shielded:

* **Restart.** The supervisor tells this registry before it stops a channel's adapter for a restart
  (``restarting``) and when a run is serving again (``serving``). A handler cancelled by the restart
  (``stop()`` cancels it, or the run's own cleanup does when the run fails) lets its turn go on,
  detached: the turn completes as any turn does (transcript, memory, jobs), and its reply is handed
  to the gateway's delivery (gateway/delivery/handover.py: the outbox, once the adapter is back).
  What was streamed before stays; no more deltas reach the old handler. Outside shutdown every
  cancelled handler of a supervised adapter is treated so: a run that fails cancels its handlers
  before the supervisor hears of the failure, and no adapter cancels a handler for another reason.
  Other callers (a scheduled prompt's job, cancelled at its timeout) cancel their turn, as before.
* **A handler that outlived the restart** gets the reply as usual and delivers it if it can (its
  adapter may reach the platform through the new run's client). When it cannot (its send fails, or a
  restart cancels it while it sends), ``gateway.delivery.stream.streamed_turn`` hands the reply over
  through ``rescue``: one delivery either way, never two.
* **Shutdown**: a handler cancelled once the gateway is closing cancels its turn with it, as before.
  Then (``close``) turns left without a handler, and replies waiting for their adapter, are
  cancelled and waited for at most ``close_wait_s``; a reply already recorded in the outbox is sent
  by the sweep after the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.delivery.handover import RESCUE, record_reply, send_reply
from gateway.types import Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.turn")

DeltaCallback = Callable[[str], Awaitable[None] | None]
TurnWork = Callable[[DeltaCallback | None], Coroutine[Any, Any, Reply | None]]

#: How long a handed-over reply waits for its adapter to be serving again before the outbox takes it.
RECONNECT_WAIT_S = 120.0
#: How long shutdown waits for the turns and hand-overs it cancels.
CLOSE_WAIT_S = 5.0


@dataclass(slots=True, eq=False)
class _InFlight:
    turn: Turn
    generation: int  # the channel's restart count when the turn began
    task: asyncio.Task[Reply | None] = field(repr=False)
    detached: bool = False  # its handler is gone: the reply is handed over
    settled: bool = False  # how the reply goes out is decided
    handed_over: bool = False


class TurnsInFlight:
    def __init__(self, *, reconnect_wait_s: float = RECONNECT_WAIT_S, close_wait_s: float = CLOSE_WAIT_S) -> None:
        self.reconnect_wait_s = reconnect_wait_s
        self.close_wait_s = close_wait_s
        self.closing = False
        self._generations: dict[str, int] = {}
        self._serving: dict[str, asyncio.Event] = {}
        self._turns: set[_InFlight] = set()
        self._handovers: set[asyncio.Task[None]] = set()

    # ----------------------------------------------------------------------- from the supervisor
    def restarting(self, channel: str) -> None:
        """The adapter of ``channel`` is about to be stopped for a restart."""
        self._generations[channel] = self._generations.get(channel, 0) + 1
        self._event(channel).clear()

    def serving(self, channel: str) -> None:
        """A run of the adapter of ``channel`` is connected."""
        self._event(channel).set()

    def _event(self, channel: str) -> asyncio.Event:
        return self._serving.setdefault(channel, asyncio.Event())

    def _restarted(self, entry: _InFlight) -> bool:
        return self._generations.get(entry.turn.message.channel, 0) != entry.generation

    # --------------------------------------------------------------------------------- the turn
    async def run(self, gateway: Services, turn: Turn, work: TurnWork, on_delta: DeltaCallback | None) -> Reply | None:
        """``work``'s reply, run in a task of the gateway's (see the module's docstring)."""
        channel = turn.message.channel
        entry: _InFlight

        def relay(piece: str) -> Awaitable[None] | None:
            if on_delta is None or entry.detached:
                return None  # its handler is gone: the stream ends with what it showed
            return on_delta(piece)

        task = asyncio.create_task(work(relay if on_delta is not None else None), name=f"turn:{channel}:{turn.turn_id}")
        entry = _InFlight(turn=turn, generation=self._generations.get(channel, 0), task=task)
        self._turns.add(entry)
        task.add_done_callback(lambda _: self._ended(gateway, entry))
        try:
            reply = await asyncio.shield(task)
        except asyncio.CancelledError:
            # Shutdown, or not a supervised adapter's turn (a scheduled prompt's job at its timeout):
            # the turn ends with its handler, as it always did.
            if self.closing or channel not in self._serving:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                raise
            if not task.done():
                entry.detached = True
                log.info("turn %s goes on without its handler (%s restarting); its reply is delivered after",
                         turn.turn_id, channel)  # fmt: skip
            elif not task.cancelled() and task.exception() is None:
                self._rescue(gateway, entry, task.result(), cancelled=True)  # it ended as its handler was cancelled
            raise
        self._settle(gateway, entry)
        # The handler delivers it; should it fail after a restart of its adapter, streamed_turn hands
        # it over through this (a contextvar: set here, it is the handler's, read after we return).
        RESCUE.set(lambda failed, cancelled: self._rescue(gateway, entry, failed, cancelled=cancelled))
        return reply

    def _rescue(self, gateway: Services, entry: _InFlight, reply: Reply | None, *, cancelled: bool) -> bool:
        """The handler could not deliver ``reply``: it was cancelled (outside shutdown), or its send
        failed after a restart of its adapter (its client may be gone). Whether the gateway took it."""
        if reply is None or (reply.turn_id and reply.turn_id != entry.turn.turn_id):
            return False
        if entry.handed_over:
            return True
        supervised = entry.turn.message.channel in self._serving
        if self.closing or not supervised or not (cancelled or self._restarted(entry)):
            return False
        self._hand_over(gateway, entry, reply)
        return True

    def _ended(self, gateway: Services, entry: _InFlight) -> None:
        self._turns.discard(entry)
        if entry.task.cancelled():
            return
        if entry.task.exception() is not None:
            if entry.detached:  # nobody else will see it
                log.error("turn %s failed after its handler was gone", entry.turn.turn_id,
                          exc_info=entry.task.exception())  # fmt: skip
            return
        self._settle(gateway, entry)

    def _settle(self, gateway: Services, entry: _InFlight) -> None:
        """Decide, once, who delivers the reply: the handler that waits for it, or the hand-over."""
        if entry.settled:
            return
        entry.settled = True
        reply = entry.task.result()
        if reply is not None and entry.detached:
            self._hand_over(gateway, entry, reply)

    def _hand_over(self, gateway: Services, entry: _InFlight, reply: Reply) -> None:
        entry.handed_over = True
        turn = entry.turn
        try:
            delivery_id = record_reply(gateway, turn, reply, hold_s=self.reconnect_wait_s)
        except Exception:
            log.exception("turn %s: its reply could not be recorded for delivery after %s restarted", turn.turn_id,
                          turn.message.channel)  # fmt: skip
            return
        if self.closing:
            return  # recorded: the sweep sends it after the next start (OTR: nothing is kept)
        channel = turn.message.channel

        async def serving() -> bool:
            event = self._serving.get(channel)
            if event is None:
                return True  # not supervised (or never connected): nothing to wait for
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), self.reconnect_wait_s)
            return event.is_set()

        task = asyncio.create_task(send_reply(gateway, turn, reply, delivery_id, serving=serving),
                                   name=f"turn-handover:{channel}:{turn.turn_id}")  # fmt: skip
        self._handovers.add(task)
        task.add_done_callback(self._handed)

    def _handed(self, task: asyncio.Task[None]) -> None:
        self._handovers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("handing a reply over failed", exc_info=task.exception())

    # -------------------------------------------------------------------------------- shutdown
    async def close(self) -> None:
        """Cancel the turns no handler waits for and the hand-overs waiting for their adapter; wait for
        them at most ``close_wait_s``. Turns a handler still waits for are that handler's to end."""
        self.closing = True
        orphans = [e.task for e in self._turns if e.detached]
        tasks = [*orphans, *self._handovers]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.close_wait_s)
            if pending:
                log.warning("%d turns or replies did not end within %.0f s of shutdown", len(pending),
                            self.close_wait_s)  # fmt: skip
