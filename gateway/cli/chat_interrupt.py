"""Ctrl-C at ``kith chat``'s prompt always leaves, even when it lands just as the prompt is drawn.

CPython's readline waits for a key in ``select()`` with no timeout. A SIGINT only sets a flag for the
interpreter, which it raises when ``select()`` returns with EINTR. A SIGINT that arrives after the
prompt is written but before ``select()`` starts (the process was preempted there, as on a loaded
machine) interrupts nothing: ``input()`` goes on waiting, and Ctrl-C seems ignored until the next key
(a CI run of the pty tests showed it: the prompt back, and the client still there 30 s later).

The signal's C handler also writes the signal's number to the wakeup file descriptor. A thread reads
it there; if the main thread is still inside the same ``input()`` a moment later, the interrupt was
lost, and the thread signals the main thread once more, now waiting in ``select()``.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: How long a Ctrl-C may take to reach ``input()`` before it is taken as lost and sent again.
GRACE_S = 0.25


class InterruptNudge:
    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self._reading = 0  # the number of the input() call the main thread is in; 0: none
        self._numbers = itertools.count(1)
        self._main: int = threading.main_thread().ident or 0
        self._read_fd = -1

    def install(self) -> None:
        """From the main thread (a wakeup fd is the main thread's); only where nothing else set one."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # the C handler must never block on a full pipe
        if signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False) != -1:
            signal.set_wakeup_fd(-1)  # someone else's: theirs to keep; this guard is given up
            os.close(read_fd)
            os.close(write_fd)
            return
        self._read_fd = read_fd
        threading.Thread(target=self._watch, name="kith-chat-sigint", daemon=True).start()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Around the main thread's ``input()``."""
        self._reading = next(self._numbers)
        try:
            yield
        finally:
            self._reading = 0

    def _watch(self) -> None:
        while True:
            try:
                received = os.read(self._read_fd, 64)
            except OSError:
                return
            if not received:
                return
            call = self._reading
            if signal.SIGINT not in received or not call:
                continue
            time.sleep(self.grace_s)
            if self._reading == call:
                signal.pthread_kill(self._main, signal.SIGINT)


#: The process's one guard: ``kith chat`` installs it, ``View.read_line`` marks its ``input()``.
NUDGE = InterruptNudge()
