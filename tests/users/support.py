"""Helpers of the people tests: a config file the CLI reads, a real conversation, and a grep of the data dir."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from gateway.app import Gateway
from gateway.cli.main import main
from gateway.config import Config
from gateway.configread import load_config
from gateway.testing import message


def write_config(tmp_path: Path, **server: Any) -> Path:
    """A config file for ``kith -c`` over ``tmp_path/data`` (echo model, no entry points)."""
    path = tmp_path / "config.yaml"
    data = {"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"}, "plugins": {"entry_points": False},
            "server": {"port": 0, **server}}  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    return path


def kith(config: Path, *argv: str) -> int:
    return main(["-c", str(config), *argv])


def config_of(path: Path) -> Config:
    return load_config(str(path))


async def converse(gw: Gateway, canary: str) -> tuple[str, str]:
    """Alice tells a canary (and it lands in a fact, pairing, a link request, bus jobs and a log file);
    Bob talks about something else. Their user ids."""
    await gw.handle_inbound(message(f"please remember my locker code {canary} for later", account="alice"))
    await gw.handle_inbound(message(f"and the second thing {canary} is the gate code", account="alice"))
    await gw.handle_inbound(message("bob here: the quarterly garden meeting moved to thursday", account="bob"))
    alice = gw.identities.lookup("websocket", "alice")
    bob = gw.identities.lookup("websocket", "bob")
    assert alice and bob
    assert gw.kg is not None and gw.bus is not None
    gw.kg.add(alice, "Alice", "has_locker_code", canary, source_type="manual")
    gw.kg.add(bob, "Bob", "likes", "gardening", source_type="manual")
    now = datetime.now(UTC)
    gw.state.access.approve("websocket", "alice", display_name="Alice", via="pairing", at=now)
    gw.state.links.create("LINK1234", user_id=alice, channel="websocket", account_id="alice", conversation_id="",
                          name="Alice", at=now, expires_at=now + timedelta(minutes=10))  # fmt: skip
    await gw.settle()
    # Jobs about her that wait: a delayed one and a dead letter.
    await gw.bus.enqueue("memory.rebuild", {"scope": f"user:{alice}"}, job_id=f"later:{alice}", delay=3600)
    await gw.bus.enqueue("memory.rebuild", {"scope": f"user:{bob}"}, job_id=f"later:{bob}", delay=3600)
    await gw.bus.redis.xadd(gw.bus.keys.dead("memory.sync"), {"id": f"dead:{alice}", "name": "memory.sync",
                            "payload": f'{{"scope":"user:{alice}"}}', "v": "1", "enq": "0", "tries": "3",
                            "error": "boom", "consumer": "c", "at": "0"})  # fmt: skip
    await gw.bus.redis.sadd(gw.bus.keys.queues, "memory.sync")
    log = Path(gw.config.data_dir) / "logs" / "kith.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text(f"04:00 turn from {alice}: fine\n04:01 bob's turn ok\n04:02 quoted: please remember my locker "
                   f"code {canary} for later\n04:03 websocket:alice connected\n")  # fmt: skip
    return alice, bob


def files_with(data_dir: Path, *needles: str) -> list[str]:
    """Every file under ``data_dir`` whose bytes hold one of ``needles`` (any case: full-text indexes
    keep lower-cased terms)."""
    found = []
    wanted = [n.lower().encode() for n in needles]
    for path in _files(data_dir):
        try:
            # The zeros a preallocated file ends with (the vector index's pages and WAL, 32 MB each)
            # hold no needle: lower-casing them was most of this scan's CPU.
            data = path.read_bytes().rstrip(b"\0").lower()
        except OSError:
            continue
        if any(n in data for n in wanted):
            found.append(str(path.relative_to(data_dir)))
    return found


def _files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def started(config: Config, **kwargs: Any) -> Gateway:
    gw = Gateway(config, **kwargs)
    await gw.__aenter__()
    return gw
