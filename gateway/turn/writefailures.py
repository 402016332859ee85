"""Writes that failed after a turn was answered (transcript, dedupe key, conversation row).

On a full disk (SQLite "database or disk is full", ``OSError`` ENOSPC) or a broken database every
turn would fail the same way; the person still gets the reply, so what is left is to tell the
operator without flooding the log: the first failure is logged with its traceback, then at most one
summary line per interval, one line when writes succeed again, and ``/healthz`` reports "degraded"
from the first failure until a later turn's writes succeed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from gateway.types import Stash, StashKey

log = logging.getLogger("kith.turn")

LOG_INTERVAL_S = 60.0


class WriteFailures:
    def __init__(self, *, interval_s: float = LOG_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.failed = 0  # failed writes since the last success
        self.last_error = ""
        self.since: float | None = None  # wall time of the first failure of this run of failures
        self._logged_at: float | None = None
        self._unlogged = 0

    def failure(self, what: str, turn_id: str, exc: BaseException) -> None:
        now = self.clock()
        self.failed += 1
        root = _first_cause(exc)
        self.last_error = f"{what}: {type(root).__name__}: {root}"
        if self.since is None:
            self.since = time.time()
        if self._logged_at is None:
            self._logged_at = now
            log.error("turn %s answered, but writing its %s failed; the reply was sent, later failures"
                      " are summarised every %.0fs", turn_id, what, self.interval_s, exc_info=exc)
            return
        self._unlogged += 1
        if now - self._logged_at >= self.interval_s:
            log.error("%d more turn writes failed in the last %.0fs; last: %s",
                      self._unlogged, now - self._logged_at, self.last_error)
            self._logged_at = now
            self._unlogged = 0

    def success(self) -> None:
        if self.failed:
            log.warning("turn writes succeed again after %d failed writes", self.failed)
        self.failed = 0
        self.since = None
        self._logged_at = None
        self._unlogged = 0

    def problem(self) -> str | None:
        if not self.failed or self.since is None:
            return None
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since))
        return (f"turn persistence failing since {started}: {self.failed} writes failed"
                f" (replies are still sent); last: {self.last_error}")


def _first_cause(exc: BaseException) -> BaseException:
    """The error that started it: a failed write's cleanup can fail too ("cannot rollback - no
    transaction is active" after SQLITE_FULL rolled back by itself) and would hide "disk is full"."""
    seen = {id(exc)}
    while exc.__context__ is not None and id(exc.__context__) not in seen:
        exc = exc.__context__
        seen.add(id(exc))
    return exc


WRITE_FAILURES: StashKey[WriteFailures] = StashKey()


def write_failures(stash: Stash) -> WriteFailures:
    """The gateway's tracker (kept in ``gateway.stash``: two gateways never share one)."""
    tracker = stash.get(WRITE_FAILURES)
    if tracker is None:
        tracker = stash[WRITE_FAILURES] = WriteFailures()
    return tracker
