"""Built-in plugin: every answered turn appended to ``sessions/YYYY-MM-DD.md`` of its memory root.

The writer is the memory wing's (``gateway.memory.session_writer.SessionLog``: batching, retries, the
start-up catch-up against the transcript; the format is ``gateway.memory.files.session_log``). This
plugin runs one per gateway: started and stopped with it, drained before a user merge and on flush,
and handed each turn after it is answered. Off-The-Record turns never get here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.memory.session_writer import SessionLog
from gateway.turn.writeback import write_back_of
from gateway.types import LLMResponse, Reply, StashKey, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.session_log")

# ---------------------------------------------------------------------------------------- hooks

SESSION_LOG: StashKey[SessionLog] = StashKey()


def _log_of(gateway: Services) -> SessionLog | None:
    return gateway.stash.get(SESSION_LOG)


@hookimpl
async def gateway_startup(gateway: Services) -> None:
    sl = SessionLog(gateway)
    sl.task = asyncio.create_task(sl.run(), name="session-log")
    gateway.stash[SESSION_LOG] = sl
    keeper = write_back_of(gateway)
    for spooled in keeper.unstored() if keeper is not None else ():
        sl.add_spooled(spooled)
    if gateway.mode == "daemon" and gateway.run_jobs and gateway.memory is not None and not gateway.memory.detached:
        # Before any turn is served: every row up to here is from an earlier run. A background task,
        # so the first reply does not wait for it.
        upto = gateway.state.turns.last_seq()
        sl.reconciler = asyncio.create_task(sl.reconcile(upto), name="session-log:reconcile")


@hookimpl
async def gateway_shutdown(gateway: Services) -> None:
    sl = gateway.stash.pop(SESSION_LOG)
    if sl is not None:
        await sl.close()


@hookimpl
async def gateway_before_users_merge(gateway: Services, into: str, source: str) -> None:
    sl = _log_of(gateway)
    if sl is not None:
        await sl.drain()


@hookimpl
async def gateway_flush(gateway: Services) -> None:
    sl = _log_of(gateway)
    if sl is None:
        return
    reconciler = sl.reconciler
    if reconciler is not None and not reconciler.done():
        await sl.scanned.wait()
    if sl.pending:
        await sl.flush()
    if reconciler is not None and not reconciler.done() and sl.failure is None:
        await asyncio.wait({reconciler})  # its blocks are written: it only records the watermark now


@hookimpl
def gateway_after_turn(gateway: Services, turn: Turn, reply: Reply, response: LLMResponse | None) -> None:
    if turn.otr or turn.user is None or turn.session is None:
        return
    sl = _log_of(gateway)
    if sl is None:
        log.warning("session log not started; turn %s not appended to the Markdown log", turn.turn_id)
        return
    sl.add(turn, reply)
