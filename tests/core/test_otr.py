"""Acceptance 6: a 10-turn Off-The-Record session leaves data dir and every table unchanged.

The derived stores (the memory index under ``qdrant/`` and the job bus's ``redis/``) are compared
logically: their files change on their own (compaction, AOF rewrites, scheduler ticks), so the test
compares what they hold - index points per scope and every job ever queued - instead of bytes.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from tests.fakes.anthropic import FakeAnthropic


def snapshot(data_dir: Path) -> tuple[dict[str, str], dict[str, list[tuple[Any, ...]]]]:
    files = {}
    for path in sorted(data_dir.rglob("*")):
        # -wal/-shm are SQLite's journal and lock-coordination files: compared logically below.
        derived = path.relative_to(data_dir).parts[0] in ("qdrant", "redis")
        if path.is_file() and not path.name.endswith(("-wal", "-shm")) and not derived:
            if path.name == "state.sqlite":
                continue
            files[str(path.relative_to(data_dir))] = hashlib.sha256(path.read_bytes()).hexdigest()
    db = sqlite3.connect(data_dir / "state.sqlite")
    tables = {}
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
        tables[name] = db.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()
    db.close()
    return files, tables


async def derived(gw: Any) -> tuple[dict[str, int], list[tuple[str, int]]]:
    points = {scope: gw.memory.scope_count(scope) for scope in gw.memory.stores.known_scopes()}
    statuses = [(q.name, q.pending + q.in_flight + q.delayed + q.dead) for q in await gw.bus.status()]
    streams = []
    for name, _ in statuses:
        streams.append((name, await gw.bus.redis.xlen(gw.bus.keys.stream(name))))
    return points, streams


async def test_otr_session_persists_nothing(
    tmp_path: Path, make_gateway: Any, ws_connect: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    client = await ws_connect(gw)
    await client.hello("phone")
    await client.ask("A normal message first.")
    await gw.settle()
    before = snapshot(gw.data_dir), await derived(gw)

    on, _ = await client.ask("/otr on")
    assert on["notice"] and on["otr"] is True
    for i in range(10):
        reply, _ = await client.ask(f"secret number {i}: the vault code is 31-{i}")
        assert reply["otr"] is True and not reply["notice"]
    # The OTR mode line reaches the model; the OTR history stays in-process for the session.
    assert "Off-The-Record" in fake_anthropic.system_text()
    assert "vault code is 31-0" in fake_anthropic.requests[-1]["messages"][0]["content"]
    off, _ = await client.ask("/otr off")
    assert off["otr"] is False

    await gw.settle()
    after = snapshot(gw.data_dir), await derived(gw)
    assert after == before
    everything = b"".join(p.read_bytes() for p in gw.data_dir.rglob("*") if p.is_file())
    assert b"vault code" not in everything

    # Back to normal: the OTR exchange is not in the history the model sees.
    await client.ask("what did I say?")
    assert all("vault" not in m["content"] for m in fake_anthropic.requests[-1]["messages"])
