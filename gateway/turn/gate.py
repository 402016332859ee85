"""Turns first: background CPU work waits while a turn is being worked on.

Live indexing embeds on one low-priority thread, but a lower priority only weighs the kernel's
choice; it does not keep that thread off a core a turn is waiting for. Measured with every stage
on (docs/benchmarks.md, "Issue 19, session 7"), the event loop spent a quarter of its time runnable
but waiting for a core while the background thread ran; with indexing held back while turns are
served, one conversation's overhead p99 fell from 22-25 to 16-20 ms. So the background thread asks
this gate before each model run: while a turn is in its CPU-bound part (between arrival and the
model call, and from the answer to the end of the turn: not while it waits on a model), and until no
turn has been there for ``quiet_s``, the run waits.

It never waits for ever: a thread that has waited ``max_wait_s`` runs for ``window_s`` whatever the
turns do, so a gateway busy without pause still indexes (a fifth of the time with the defaults) and
an index can fall behind a burst of turns but catches up when it ends. One gate per process: the
background thread is one per process too (``gateway.memory.search.embed.background_executor``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

MAX_WAIT_S = 1.0  # the longest a background run waits for turns to pause
WINDOW_S = 0.25  # then it runs this long without asking (about one indexing slice)
QUIET_S = 0.05  # "paused": no turn for this long (a run started in the gap between two turns
# would still be running when the next one arrives: one run is 10-30 ms of CPU)


class TurnGate:
    # Whether the running task is inside a turn's CPU-bound part (tasks it starts inherit it): only
    # such a task may hand its place back in ``waiting``, never a job or a request outside any turn.
    _holding: ContextVar[bool] = ContextVar("turngate_holding", default=False)

    def __init__(self, *, max_wait_s: float = MAX_WAIT_S, window_s: float = WINDOW_S, quiet_s: float = QUIET_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.max_wait_s, self.window_s, self.quiet_s, self.clock = max_wait_s, window_s, quiet_s, clock
        self._last_end = float("-inf")  # when the last turn left its CPU-bound part
        self._busy = 0
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._window_end = 0.0
        self.waited_s = 0.0  # total time background runs waited here (for tests and diagnosis)

    @property
    def busy(self) -> int:
        """Turns in their CPU-bound part now."""
        return self._busy

    def _enter(self) -> None:
        with self._lock:
            self._busy += 1
            self._idle.clear()

    def _leave(self) -> None:
        with self._lock:
            self._busy = max(0, self._busy - 1)
            if not self._busy:
                self._last_end = self.clock()
                self._idle.set()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Around a turn: background runs wait until it ends (or pauses, ``waiting``)."""
        self._enter()
        token = self._holding.set(True)
        try:
            yield
        finally:
            self._holding.reset(token)
            self._leave()

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Inside ``turn``: the turn waits on something else (a model's answer, index work it asked
        for) and needs no core. Outside any turn (a job, an HTTP request) it changes nothing."""
        inside = self._holding.get()
        if inside:
            token = self._holding.set(False)
            self._leave()
        try:
            yield
        finally:
            if inside:
                self._enter()
                self._holding.reset(token)

    def wait(self) -> None:
        """Called by a background thread before each unit of CPU work (one model run): returns once
        no turn has been in its CPU-bound part for ``quiet_s``, or after ``max_wait_s`` (then the
        next ``window_s`` pass without waiting)."""
        started = now = self.clock()
        if now < self._window_end:
            return
        deadline = started + self.max_wait_s
        while True:
            if now >= deadline:
                self._window_end = now + self.window_s
                break
            if self._busy:
                self._idle.wait(deadline - now)
            else:
                quiet = now - self._last_end
                if quiet >= self.quiet_s:
                    break
                time.sleep(min(self.quiet_s - quiet, deadline - now))
            now = self.clock()
        self.waited_s += now - started


TURNS = TurnGate()
