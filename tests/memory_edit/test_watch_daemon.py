"""Acceptance against a real ``kith run``: a file edited on disk is found by ``kith memory search``
(answered by the daemon, which holds the index) and a deleted one is gone; polled with a deadline."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gateway.cli.main import main
from tests.kith_run import Daemon, free_port, write_config

DEADLINE_S = 10.0  # the design target is 2 s (measured ~0.1 s in-process); slack for a loaded machine


def search(capsys: pytest.CaptureFixture[str], config: Path, *query: str) -> list[str]:
    assert main(["-c", str(config), "memory", "search", "--user", "ada", "--json", *query]) == 0
    return [h["text"] for h in json.loads(capsys.readouterr().out)]


def poll(capsys: pytest.CaptureFixture[str], config: Path, want: bool, word: str) -> float:
    start = time.monotonic()
    while any(word in t for t in search(capsys, config, "lighthouse", "keeper")) != want:
        assert time.monotonic() - start < DEADLINE_S, f"{word!r} {'not found' if want else 'still found'}"
        time.sleep(0.1)
    return time.monotonic() - start


def test_kith_memory_search_sees_hand_edits_and_deletions(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    config = write_config(tmp_path / "config.yaml", data, free_port())
    daemon = Daemon(config, tmp_path / "daemon.log").start()
    try:
        root = data / "users" / "ada"
        (root / "notes").mkdir(parents=True)
        note = root / "notes" / "coast.md"
        note.write_text("# Coast\n\nThe lighthouse keeper on the island is called Morwenna.\n")
        poll(capsys, config, True, "Morwenna")
        note.write_text("# Coast\n\nThe lighthouse keeper on the island is called Jago.\n")
        poll(capsys, config, True, "Jago")
        assert not any("Morwenna" in t for t in search(capsys, config, "lighthouse", "keeper"))
        note.unlink()
        poll(capsys, config, False, "Jago")
    finally:
        assert daemon.stop() == 0, daemon.log_text()[-3000:]
