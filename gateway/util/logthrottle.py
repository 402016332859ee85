"""Warnings that a flood or an attacker could trigger thousands of times a second (refused requests,
rate-limited clients): at most one line per kind and interval, saying how many were held back since
the last line. The counts themselves belong in ``/healthz``; the log only has to show that it happens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogThrottle:
    def __init__(self, logger: logging.Logger, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warn(self, kind: str, message: str, *args: object) -> bool:
        """Log ``message % args`` unless ``kind`` was logged less than an interval ago; True if logged."""
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if held:
            self.logger.warning(message + " (and %d more since the last line)", *args, held)
        else:
            self.logger.warning(message, *args)
        return True
