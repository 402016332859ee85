"""``kith run`` start-up problems an operator can fix end with one clear line and exit code 2.

Before: a port in use, a data directory held by a running daemon, or a ``data_dir`` that is a file
each printed a 40-line traceback (OSError, IndexBusyError, FileExistsError) and exited 1.
"""

from __future__ import annotations

import errno
import socket
import subprocess
from pathlib import Path

import pytest

from gateway.cli.run import explain
from gateway.configread import parse_config
from gateway.memory.search.index import IndexBusyError
from tests.kith_run import ROOT, Daemon, free_port, kith_argv, write_config


def run_kith(config: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(kith_argv(config, "run"), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def assert_one_clear_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def test_port_in_use_by_another_program(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_kith(write_config(tmp_path / "c.yaml", tmp_path / "data", port))
    assert_one_clear_line(result, f"port {port}", "already in use", "server.port")
    # It failed before opening anything: no embedded Redis or index was started for nothing.
    assert not (tmp_path / "data" / "qdrant").exists() and not (tmp_path / "data" / "redis").exists()


def test_second_daemon_same_port_or_same_data_dir(tmp_path: Path) -> None:
    port = free_port()
    first = Daemon(write_config(tmp_path / "a.yaml", tmp_path / "a", port), tmp_path / "a.log").start()
    try:
        # Same port, another data directory.
        same_port = run_kith(write_config(tmp_path / "b.yaml", tmp_path / "b", port))
        assert_one_clear_line(same_port, f"port {port}", "already in use")
        # Same data directory, another port.
        same_dir = run_kith(write_config(tmp_path / "c.yaml", tmp_path / "a", free_port()))
        line = assert_one_clear_line(same_dir, str(tmp_path / "a"), "in use by another kith daemon")
        assert f"pid {first.pid}" in line
        assert first.alive()  # the refused second start did not disturb the first
    finally:
        assert first.stop() == 0


def test_data_dir_is_a_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("not a directory\n")
    result = run_kith(write_config(tmp_path / "c.yaml", data, free_port()))
    assert_one_clear_line(result, str(data), "not a directory")
    assert data.read_text() == "not a directory\n"


def test_data_dir_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = run_kith(write_config(tmp_path / "c.yaml", tmp_path / "file" / "data", free_port()))
    assert_one_clear_line(result, "data_dir", "cannot be created")


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (OSError(errno.EADDRINUSE, "address already in use"), ("port 5", "already in use")),
        (OSError(errno.EADDRNOTAVAIL, "cannot assign"), ("not an address of this machine",)),
        (IndexBusyError("the memory index /d/qdrant is in use by another process"), ("in use", "data_dir")),
    ],
)
def test_late_failures_are_explained_too(tmp_path: Path, exc: Exception, words: tuple[str, ...]) -> None:
    """The same problems surfacing once the gateway is starting (the port taken between the check
    and the bind, the index held by a `kith memory` command) get the same one line."""
    config = parse_config({"data_dir": str(tmp_path), "server": {"port": 5}}, env={})
    line = explain(exc, config)
    assert line is not None and "\n" not in line
    for word in words:
        assert word in line


def test_other_errors_keep_their_traceback(tmp_path: Path) -> None:
    config = parse_config({"data_dir": str(tmp_path)}, env={})
    assert explain(RuntimeError("a bug"), config) is None
    assert explain(OSError(errno.EIO, "I/O error"), config) is None
