"""Tasks started per event (a message, a slash command) and owned until they end.

An adapter hands each inbound event to a task of its own so its reader never waits on a turn. The
event loop keeps only a weak reference to a task, so the set keeps them alive; a failure is logged
with what failed, instead of "Task exception was never retrieved" at garbage collection; and a stop
cancels whatever still runs and waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def while_showing(indicator: Coroutine[Any, Any, None], work: Awaitable[T]) -> T:
    """``work``'s result, with ``indicator`` (a platform's typing loop) running until ``work`` ends,
    however it ends. The indicator's own failure is not the turn's: the reply still goes out."""
    shown = asyncio.ensure_future(indicator)
    try:
        return await work
    finally:
        shown.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await shown


class EventTasks:
    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log, self._what = log, what
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(self._isolated(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _isolated(self, work: Awaitable[None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log.exception("%s failed", self._what)

    async def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def unless_set(call: Awaitable[T], event: asyncio.Event) -> T | None:
    """``call``'s result, or None when ``event`` is set first: the call is then cancelled (an adapter's
    long poll or IDLE must not hold up its ``stop()``). An error of a call cut off that way is dropped."""
    work = asyncio.ensure_future(call)
    stopped = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
    return work.result() if work.done() and not work.cancelled() else None
