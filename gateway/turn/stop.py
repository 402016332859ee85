"""Stopping a reply: the person asked the model to stop (the web chat's Stop button, a WebSocket
``cancel`` frame, docs/protocol.md#stopping-a-reply).

The channel hands the turn an ``asyncio.Event`` (``Gateway.handle_inbound(stop=...)``); once it is set,
the model call (with any tool round in progress) is cancelled, and the turn ends with what was already
shown to the person, marked: the transcript, the session log and the history keep exactly that text,
ending in :data:`STOPPED_MARK`, so neither the person later nor the model in the next turn mistakes
a cut-off answer for a whole one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.types import LLMResponse, StashKey

log = logging.getLogger("kith.turn")

STOP: StashKey[asyncio.Event] = StashKey()
STOPPED_MARK = "*[stopped]*"
STOPPED_BEFORE = "*[stopped before answering]*"
STOPPED_REASON = "stopped"  # LLMResponse.stop_reason of a stopped turn


class Shown:
    """What the person has seen of the reply so far: every piece that went to ``on_delta``."""

    def __init__(self, on_delta: Callable[[str], Awaitable[None] | None] | None) -> None:
        self.pieces: list[str] = []
        self._on_delta = on_delta

    async def __call__(self, piece: str) -> None:
        self.pieces.append(piece)
        if self._on_delta is not None:
            result = self._on_delta(piece)
            if result is not None:
                await result

    def stopped(self) -> LLMResponse:
        """The response of a stopped turn: the text shown, marked."""
        text = "".join(self.pieces).rstrip()
        return LLMResponse(text=f"{text}\n\n{STOPPED_MARK}" if text else STOPPED_BEFORE, stop_reason=STOPPED_REASON)


async def until_stopped(call: Awaitable[Any], stop: asyncio.Event | None, shown: Shown, turn_id: str) -> Any:
    """``call``'s result, or ``shown.stopped()`` when ``stop`` is set first (the call is cancelled and
    awaited: no model stream or tool outlives the turn)."""
    if stop is None:
        return await call
    task = asyncio.ensure_future(call)
    if not stop.is_set():
        waiter = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
    if task.done():
        return task.result()  # finished first (or in the same instant): the whole answer stands
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    log.info("turn %s stopped by the person after %d characters", turn_id, sum(len(p) for p in shown.pieces))
    return shown.stopped()
