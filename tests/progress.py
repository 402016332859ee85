"""Progress of the parallel part of ``scripts/test`` while it runs.

pytest-parallex replays the workers' reports in the process that forked them only when each worker
has finished: without this, a person (or a CI log) sees nothing for minutes, and learns of a failure
only at the end. Each forked worker writes here, straight to the shared stderr, a line every
``EVERY`` tests the workers finished together, and at once the name of any test that failed; the
usual report and summary still come at the end.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
from typing import Any

import pytest

EVERY = 100


class Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self.parent = os.getpid()  # where the reports are replayed at the end: not counted again there
        # In shared memory, made before the fork, so every worker adds to the same counts.
        self.done: Any = multiprocessing.Value(ctypes.c_int, 0)
        self.failed: Any = multiprocessing.Value(ctypes.c_int, 0)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if os.getpid() == self.parent or not (report.failed or report.when == "teardown"):
            return  # a test is counted at its teardown; a step of it that fails is named at once
        with self.done.get_lock():
            self.failed.value += report.failed
            self.done.value += report.when == "teardown"
            done, bad = self.done.value, self.failed.value
        if report.failed:
            _say(f"==> FAILED ({report.when}) {report.nodeid}")
        if report.when == "teardown" and done % EVERY == 0:
            _say(f"==> {done} of {self.total} tests done, {bad} failed")


def _say(line: str) -> None:
    os.write(2, (line + "\n").encode())  # unbuffered: a forked worker's own buffers are never flushed


def install(config: pytest.Config, total: int) -> None:
    """Called in the process that collected the suite, before the workers are forked from it."""
    config.pluginmanager.register(Progress(total), "kith-progress")
