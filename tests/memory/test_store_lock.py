"""Seed 004's per-file lock: two writers on one file, in two processes (what the ``flock`` under
``.locks/`` is for), lose no write, and ``write_if`` is a true compare-and-set."""

from __future__ import annotations

import hashlib
import multiprocessing
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from gateway.memory.files.store import MemoryStore, StaleWriteError

FILE = "notes/shared.md"
WRITERS = 4
APPENDS = 15
ROUNDS = 12

_SPAWN = multiprocessing.get_context("spawn")  # a clean child: forking a threaded test worker can deadlock


def _appender(root: str, writer: int, barrier: Barrier) -> None:
    store = MemoryStore(Path(root))  # a store of its own, as another process of the daemon would open
    barrier.wait()
    for i in range(APPENDS):
        store.append(FILE, f"writer {writer} line {i}\n", source="test")


def _compare_and_set(root: str, writer: int, barrier: Barrier,
                     results: multiprocessing.Queue[tuple[int, int, bool]]) -> None:
    store = MemoryStore(Path(root))
    for round_ in range(ROUNDS):
        barrier.wait()  # both read the same version...
        seen = hashlib.sha256(store.read(FILE).encode()).hexdigest()
        barrier.wait()  # ...then both try to replace it
        try:
            store.write_if(FILE, f"round {round_} by writer {writer}\n", expected_sha256=seen, source="test")
        except StaleWriteError:
            results.put((round_, writer, False))
        else:
            results.put((round_, writer, True))
        barrier.wait()  # the round is over before the next read


def _run(target: Callable[..., None], writers: int, root: Path, *shared: object) -> None:
    procs = [_SPAWN.Process(target=target, args=(str(root), w, *shared)) for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0, f"writer process ended with {p.exitcode}"


def test_concurrent_appends_from_two_processes_lose_no_line(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    _run(_appender, WRITERS, tmp_path, _SPAWN.Barrier(WRITERS))
    lines = store.read(FILE).splitlines()
    expected = {f"writer {w} line {i}" for w in range(WRITERS) for i in range(APPENDS)}
    assert sorted(lines) == sorted(expected)  # every append, each once: no read-modify-write was lost
    assert any((tmp_path / ".locks").iterdir())  # the sidecar lock, not the data file, was locked


def test_write_if_lets_exactly_one_of_two_racing_writers_win(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.write(FILE, "start\n", source="test")
    results: multiprocessing.Queue[tuple[int, int, bool]] = _SPAWN.Queue()
    _run(_compare_and_set, 2, tmp_path, _SPAWN.Barrier(2), results)
    winners: dict[int, list[int]] = {round_: [] for round_ in range(ROUNDS)}
    for _ in range(2 * ROUNDS):  # one outcome per writer and round
        round_, writer, won = results.get(timeout=30)
        if won:
            winners[round_].append(writer)
    assert all(len(w) == 1 for w in winners.values()), winners  # never both, never neither
    last = ROUNDS - 1
    assert store.read(FILE) == f"round {last} by writer {winners[last][0]}\n"
    # A copy read before the last write is refused, and the file is left as the winner wrote it.
    stale = hashlib.sha256(b"start\n").hexdigest()
    with pytest.raises(StaleWriteError):
        store.write_if(FILE, "late\n", expected_sha256=stale, source="test")
    assert store.read(FILE) == f"round {last} by writer {winners[last][0]}\n"
