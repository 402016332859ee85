"""``kith run`` stops promptly on SIGTERM: a service manager restarting it, or an operator pressing
Ctrl-C, should not wait on a job bus read that has nothing to do."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.kith_run import Daemon, free_port, write_config

pytestmark = pytest.mark.serial  # measures a duration: runs alone, after the parallel part of the suite


def test_an_idle_daemon_exits_within_a_second_of_sigterm(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.yaml", tmp_path / "data", free_port())
    daemon = Daemon(config, tmp_path / "kith.log").start()
    try:
        # Idle: the embedder and the index have loaded, start-up syncs are done.
        deadline = time.monotonic() + 60
        while "memory: ready" not in daemon.log_text():
            assert daemon.alive(), daemon.log_text()[-3000:]
            assert time.monotonic() < deadline, daemon.log_text()[-3000:]
            time.sleep(0.05)
        time.sleep(1.5)  # past one whole job-bus read block (1 s): the read loop is blocked in it
        assert daemon.proc is not None
        sent = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        code = daemon.proc.wait(30)
        took = time.monotonic() - sent
    finally:
        daemon.stop()
    assert code == 0, daemon.log_text()[-3000:]
    assert took <= 1.0, f"kith run took {took:.2f}s to stop after SIGTERM"
