"""The disk floor of the embedded index: whether indexing is paused for lack of space, and since when.

Below ``memory.min_free_mb`` free on the embedded index's filesystem a write there can SIGBUS the
process (``gateway.diskspace``), so indexing pauses. The index queue keeps the work that arrives
meanwhile and resumes it (``queue``); the loader leaves the index closed when there is no room to open
it (``loading``). This is the state they share: one measurement, one pause, one log line per pause.
"""

from __future__ import annotations

import logging
import time

from gateway.util.diskspace import DiskFloor, LowDiskSpaceError, Space

log = logging.getLogger(__name__)


class IndexPause:
    def __init__(self, floor: DiskFloor, *, check_s: float) -> None:
        self.floor = floor
        self.check_s = check_s  # how often the queue measures again while paused (memory.disk_check_s)
        self.low_space: Space | None = None  # the last measurement under the floor, None when fine
        self.since: float | None = None  # monotonic time indexing paused at, None = running

    @property
    def paused(self) -> bool:
        """Indexing is paused for lack of disk space (index work is kept for later)."""
        return self.since is not None

    def pause(self, space: Space) -> None:
        self.low_space = space
        if self.since is None:
            self.since = time.monotonic()
            # Logged once per pause, not per write: a busy gateway would log every turn otherwise.
            log.warning("memory: indexing paused: %s; index work is kept and resumes by itself when"
                        " space returns (checked every %gs)", space.describe(), self.check_s)

    def lift(self) -> float:
        """Indexing runs again; how long it was paused, in seconds."""
        assert self.since is not None
        paused_for = time.monotonic() - self.since
        self.since = None
        return paused_for

    def error(self, what: str) -> LowDiskSpaceError:
        """What a caller that cannot wait for space (an operator's rebuild, an import) is told."""
        return LowDiskSpaceError(self.low_space or self.floor.check(), what)
