"""Acceptance: a backup taken while turns run restores on a fresh data dir, and ``kith memory search``
finds the same hits there. The real CLI (in a worker thread: tests/ops/cli.py) against a real daemon
started here, which keeps answering turns on the event loop while the backup runs."""

from __future__ import annotations

import asyncio
import io
import json
import os
import tarfile
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.app import Gateway
from gateway.configread import load_config
from gateway.memory.search.service import MemoryService
from gateway.ops import backup as backup_module
from gateway.ops.backup import excluded
from gateway.testing import GatewayFactory, message
from tests.ops.cli import kith

FACTS = {
    "zanzibar": "my grandmother grew up on Zanzibar and taught me to cook pilau",
    "oboe": "I play the oboe in a community orchestra on Tuesdays",
    "kestrel": "a kestrel nests every spring on the roof of our barn",
    "quasar": "my thesis was about quasar variability in the radio band",
}


def config_file(path: Path, data_dir: Path, port: int) -> Path:
    path.write_text(yaml.safe_dump({"data_dir": str(data_dir), "llm": {"provider": "echo"},
                                    "server": {"port": port}, "plugins": {"entry_points": False}}))
    return path


def with_word(hits: list[dict[str, Any]], word: str) -> set[tuple[str, str]]:
    return {(h["source"], h["text"]) for h in hits if word in h["text"].lower()}


async def test_backup_while_turns_run_restores_with_the_same_hits(make_gateway: GatewayFactory, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    gw: Gateway = await make_gateway()
    for text in FACTS.values():
        assert await gw.handle_inbound(message(text, account="sam"))
    await gw.settle()
    sam = next(p.name for p in (gw.data_dir / "users").iterdir())
    assert gw.memory is not None
    before = {w: [asdict(h) for h in await gw.memory.recall(scope=f"user:{sam}", query=w, k=8)] for w in FACTS}

    # Turns keep coming (Sam and someone else) while the backup is taken in another process.
    stop, flowing = asyncio.Event(), asyncio.Event()
    sent = window_turns = 0

    async def traffic() -> None:
        nonlocal sent, window_turns
        while not stop.is_set():
            await gw.handle_inbound(message(f"ordinary chatter number {sent}", account="sam" if sent % 2 else "ann"))
            sent += 1
            if sent >= 5:
                flowing.set()
            if in_window.is_set():
                window_turns += 1
                if window_turns >= 2:
                    two_more.set()
            await asyncio.sleep(0.02)  # a busy conversation, leaving the CPU to the backup process

    # The interesting window is between the state snapshot and the file copy: hold the first file read
    # until the daemon has answered two more turns, so turns land there on every run, however fast.
    in_window, two_more = threading.Event(), threading.Event()
    original = backup_module.read_verified

    def read_after_two_turns(path: Path) -> Any:
        if not in_window.is_set():
            in_window.set()
            assert two_more.wait(60), "the daemon answered no turn while the backup ran"
        return original(path)

    monkeypatch.setattr(backup_module, "read_verified", read_after_two_turns)
    cfg = config_file(tmp_path / "kith.yaml", gw.data_dir, gw.port or 0)
    runner = asyncio.create_task(traffic())
    try:
        await asyncio.wait_for(flowing.wait(), 60)
        code, out, err = await kith("-c", str(cfg), "backup", str(tmp_path / "kith.tar.gz"), "--json")
    finally:
        stop.set()
        await runner
    assert window_turns >= 2  # answered between the backup's state snapshot and its file copy
    assert code == 0, err
    report = json.loads(out)
    assert report["files"] > 0 and report["rows"] > 0 and sent > 5
    with tarfile.open(tmp_path / "kith.tar.gz") as tar:
        names = tar.getnames()
        assert not [n for n in names if n.startswith("files/") and excluded(Path(n[len("files/"):]))]
        assert not any(n.startswith(("files/qdrant", "files/redis", "files/operator.token")) for n in names)
    assert os.stat(tmp_path / "kith.tar.gz").st_mode & 0o077 == 0

    new = tmp_path / "restored"
    code, out, err = await kith("-c", str(cfg), "restore", str(tmp_path / "kith.tar.gz"), "--data-dir", str(new),
                                "--json")
    assert code == 0, err
    restored = json.loads(out)
    assert restored["tables"]["turns"] >= len(FACTS) and restored["index"]
    new_cfg = config_file(tmp_path / "new.yaml", new, 0)
    code, out, err = await kith("-c", str(new_cfg), "memory", "search", "--user", sam, "--json", "oboe")
    assert code == 0, err
    found = {"oboe": json.loads(out)}
    svc = MemoryService(load_config(new_cfg))  # the other words in this process: one embedder load, not three
    await svc.start()
    try:
        for word in FACTS.keys() - found.keys():
            found[word] = [asdict(h) for h in await svc.recall(scope=f"user:{sam}", query=word, k=8)]
    finally:
        await svc.close()
    for word in FACTS:
        # every hit the daemon had before the backup is found, word for word (later turns may add more:
        # the working memory the daemon wrote while the backup ran quotes the fact too)
        assert with_word(before[word], word), word
        assert with_word(before[word], word) <= with_word(found[word], word), word

    # a damaged backup is refused, naming the file; so is something that is not a backup at all
    damaged = tmp_path / "damaged.tar"
    with tarfile.open(tmp_path / "kith.tar.gz") as src, tarfile.open(damaged, "w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else b""  # type: ignore[union-attr]
            if member.name.endswith("IDENTITY.md"):
                data += b"\nsomeone was here\n"
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    code, _, err = await kith("-c", str(cfg), "restore", str(damaged), "--data-dir", str(tmp_path / "d1"))
    assert code == 1 and "IDENTITY.md: content differs from the manifest" in err
    (tmp_path / "junk.tar").write_bytes(b"junk")
    code, _, err = await kith("-c", str(cfg), "restore", str(tmp_path / "junk.tar"), "--data-dir", str(tmp_path / "d2"))
    assert code == 1 and "not a kith backup" in err

    # restoring twice into the same place is refused; nothing of the first restore is touched
    code, _, err = await kith("-c", str(cfg), "restore", str(tmp_path / "kith.tar.gz"), "--data-dir", str(new))
    assert code == 1 and "not empty" in err


@pytest.mark.parametrize("name", ["qdrant/x", "redis/appendonly.aof", "state.sqlite-wal", "operator.token",
                                  "users/u1/.locks/a.lock", "users/u1/.notes.md.tmp-12-ab", "daemon.lock"])
def test_derived_and_private_files_are_left_out(name: str) -> None:
    assert excluded(Path(name))


@pytest.mark.parametrize("name", ["users/u1/USER.md", "users/u1/sessions/2026-01-01.md", "users/u1/.audit.jsonl",
                                  "personas/kith/SOUL.md", "channels/telegram-1/CHANNEL.md"])
def test_memory_is_kept(name: str) -> None:
    assert not excluded(Path(name))
