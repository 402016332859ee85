"""File-descriptor exhaustion must not flood the log (issue 12, item 9).

A real ``kith run`` starts with ``RLIMIT_NOFILE`` lowered (``preexec_fn``), and the test opens more
connections than it has descriptors left. asyncio's accept loop used to log a traceback 128 times
per readiness event and re-arm itself as often: 13,000 tracebacks a second. Now accepting pauses and
one line is logged per interval, and once the connections are gone the daemon serves again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from tests.kith_run import ROOT, free_port, kith_argv, write_config

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts descriptors in /proc")

LIMIT = 128
HOLD_S = 5.0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    def lower_limit() -> None:  # in the child, before exec: the daemon and what it spawns get LIMIT
        resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))

    with open(log, "wb") as err:
        proc = subprocess.Popen(kith_argv(config, "run"), cwd=ROOT, stdout=subprocess.PIPE, stderr=err,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=lower_limit)
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    out, deadline = b"", time.monotonic() + 120
    while b"kith is running" not in out:
        out += proc.stdout.read() or b""
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"kith run did not start:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(0.05)
    return proc


def _flood(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    return socks


async def _serves(port: int, timeout: float = 20.0) -> dict[str, object]:
    """/healthz and one WebSocket turn, retried until they work or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        while True:
            try:
                async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                    assert resp.status == 200
                async with http.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
                    await ws.send_json({"type": "hello", "client_id": "after-the-flood"})
                    assert (await ws.receive_json())["type"] == "ready"
                    await ws.send_json({"type": "message", "id": "1", "text": "still there?"})
                    while True:
                        frame = await ws.receive_json()
                        if frame["type"] in ("reply", "error"):
                            return frame  # type: ignore[no-any-return]
            except (aiohttp.ClientError, TimeoutError, AssertionError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)


async def test_out_of_descriptors_logs_once_and_recovers(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "config.yaml", tmp_path / "data", port)
    log = tmp_path / "daemon.log"
    proc = _start(config, log)
    socks: list[socket.socket] = []
    try:
        idle = _fds(proc.pid)
        assert idle < LIMIT - 16, f"the daemon uses {idle} descriptors at rest; raise LIMIT"
        start = log.stat().st_size
        socks = _flood(port, LIMIT + 64)
        for _ in range(200):  # up to 10 s for the daemon to accept what it can
            if _fds(proc.pid) >= LIMIT:
                break
            await asyncio.sleep(0.05)
        assert _fds(proc.pid) >= LIMIT - 1, "the flood did not use up the daemon's descriptors"
        await asyncio.sleep(HOLD_S)
        flood_log = log.read_bytes()[start:].decode(errors="replace")
        assert proc.poll() is None
        lines = flood_log.splitlines()
        assert len(lines) < 100, f"{len(lines)} log lines in {HOLD_S:.0f} s:\n" + "\n".join(lines[:20])
        assert "Traceback" not in flood_log
        assert "cannot accept connections" in flood_log and "Too many open files" in flood_log
    finally:
        for s in socks:
            s.close()
    try:
        frame = await _serves(port)
        assert frame["type"] == "reply" and "still there?" in str(frame["text"])
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_repeat_filter_passes_one_record_per_interval_and_counts_the_rest() -> None:
    """The safety net on the ``asyncio`` logger, for servers kith does not start itself."""
    from gateway.logs import RepeatFilter

    logger = logging.getLogger("kith.test.repeat")
    logger.propagate = False
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    now = [0.0]  # a clock the test moves: 10,000 records can take longer than any real interval
    logger.addFilter(RepeatFilter(interval_s=0.2, clock=lambda: now[0]))
    try:
        flood = OSError(24, "Too many open files")
        for _ in range(10_000):
            logger.error("socket.accept() out of system resource", exc_info=(OSError, flood, None))
        logger.error("something else")
        assert seen == ["socket.accept() out of system resource", "something else"]
        now[0] += 0.25
        logger.error("socket.accept() out of system resource", exc_info=(OSError, flood, None))
        assert seen[-1].startswith("socket.accept() out of system resource (the same message 9999 more times")
    finally:
        logger.removeHandler(handler)
