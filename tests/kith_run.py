"""``kith run`` as a real subprocess: a config file on a free port, start, wait until it serves, stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, data_dir: Path, port: int, **extra: Any) -> Path:
    cfg: dict[str, Any] = {
        "data_dir": str(data_dir),
        "llm": {"provider": "echo"},
        "server": {"host": "127.0.0.1", "port": port},
        "plugins": {"entry_points": False},
        **extra,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def kith_argv(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "gateway.cli.main", "-c", str(config), *args]


class Daemon:
    """One ``kith run`` process; its stderr (the log) goes to ``log``."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> Daemon:
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                kith_argv(self.config, "run"), cwd=ROOT, stdout=subprocess.PIPE, stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline = time.monotonic() + timeout
        out = b""
        while b"kith is running" not in out:
            chunk = self.proc.stdout.read() or b""
            out += chunk
            if self.proc.poll() is not None:
                raise AssertionError(f"kith run exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"kith run did not start within {timeout}s:\n{self.log_text()[-4000:]}")
            time.sleep(0.05)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 60) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode
