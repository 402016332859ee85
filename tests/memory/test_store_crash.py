"""A writer SIGKILLed in the middle of rewrites leaves each file old or new, never torn (acceptance 2)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gateway.memory.files.store import MemoryStore

# Each version is a file of one repeated digit, big enough that a write takes several syscalls' worth.
_WRITER = r"""
import sys
from pathlib import Path
from gateway.memory.files.store import MemoryStore
store = MemoryStore(Path(sys.argv[1]), max_file_bytes=1 << 20)
size = int(sys.argv[2])
i = 0
print("ready", flush=True)
while True:
    for n in range(3):
        store.write(f"f{n}.md", str(i % 10) * size, source="crash-test")
        store.append("log.md", f"{i}\n" if i % 50 else "", source="crash-test")
    i += 1
"""


def _assert_whole(root: Path, size: int) -> None:
    for n in range(3):
        path = root / f"f{n}.md"
        if not path.exists():
            continue
        data = path.read_bytes()
        assert len(data) == size, f"torn file: {len(data)} bytes"
        assert len(set(data)) == 1, "mixed versions in one file"


def test_sigkill_never_tears_a_file(tmp_path: Path) -> None:
    size = 200_000
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for round_ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), str(size)], stdout=subprocess.PIPE, env=env
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(0.02 + 0.013 * round_)  # kill at varying points of the loop
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _assert_whole(tmp_path, size)
    # The store still works after the crashes; leftover temp files are hidden and never listed.
    store = MemoryStore(tmp_path, max_file_bytes=1 << 20)
    store.write("f0.md", "9" * size, source="t")
    assert {e.path for e in store.files()} <= {"f0.md", "f1.md", "f2.md", "log.md"}
    _assert_whole(tmp_path, size)
    leftovers = list(tmp_path.glob(".*.tmp-*"))
    assert store.remove_stale_temp_files(older_than_s=3600) == 0  # fresh ones may belong to live writers
    assert store.remove_stale_temp_files(older_than_s=-1) == len(leftovers)
    assert not list(tmp_path.glob(".*.tmp-*"))
