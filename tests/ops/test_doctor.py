"""``kith doctor`` as a person runs it (the CLI in a worker thread, tests/ops/cli.py), against a daemon
started here, a port held by something else, a dead Redis and model server, and a broken config."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from gateway.testing import GatewayFactory
from tests.ops.cli import kith


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


async def doctor(config: Path, timeout: float = 15) -> tuple[int, dict[str, dict[str, str]], str]:
    """``kith doctor --json``, run in a thread of this process beside the daemon it checks: under a
    loaded suite the daemon can answer later than the 1.5 s default, so the probes get ``timeout``."""
    code, out, err = await kith("-c", str(config), "doctor", "--json", "--timeout", str(timeout))
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    return code, checks, err


def tree(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file() and "redis" not in p.parts)


async def test_all_fine_against_a_running_daemon(make_gateway: GatewayFactory, tmp_path: Path) -> None:
    gw = await make_gateway()
    os.chmod(gw.data_dir, 0o700)
    cfg = write_config(tmp_path / "kith.yaml", {
        "data_dir": str(gw.data_dir), "llm": {"provider": "echo"}, "server": {"port": gw.port},
        "memory": {"min_free_mb": 1},
    })
    started = time.monotonic()
    code, checks, err = await doctor(cfg)
    assert code == 0, (checks, err)
    assert time.monotonic() - started < 60  # generous: the machine is shared; the figure is in the docs
    assert {"config", "data dir", "disk", "port", "state", "redis", "clock", "index", "model main"} <= set(checks)
    assert checks["port"]["status"] == "ok" and "kith daemon answers" in checks["port"]["detail"]
    assert checks["redis"]["status"] == "ok"  # the daemon's embedded server, over its socket
    assert checks["state"]["status"] == "ok" and checks["index"]["status"] == "ok"
    assert all(c["status"] in ("ok", "skip") for c in checks.values()), checks
    # stopped: the same data dir is looked at and left exactly as it was
    await gw.close()
    before = tree(gw.data_dir)
    code, checks, err = await doctor(cfg)
    assert code == 0, (checks, err)
    assert "is free" in checks["port"]["detail"] and checks["redis"]["status"] == "skip"
    assert tree(gw.data_dir) == before


async def test_failures_are_lines_and_exit_1_and_nothing_is_created(tmp_path: Path) -> None:
    # a port held by something that is not kith, a Redis that does not answer, a model server that is down
    taken = web.Application()
    async def not_kith(request: web.Request) -> web.Response:
        return web.Response(text="not kith")

    taken.router.add_get("/healthz", not_kith)
    runner = web.AppRunner(taken)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    dead = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    dead_port = dead.sockets[0].getsockname()[1]
    dead.close()
    await dead.wait_closed()
    data_dir = tmp_path / "never-created"
    cfg = write_config(tmp_path / "kith.yaml", {
        "data_dir": str(data_dir), "server": {"port": port},
        "bus": {"url": f"redis://127.0.0.1:{dead_port}/0"},
        "llm": {"provider": "openai", "base_url": f"http://127.0.0.1:{dead_port}/v1"},
    })
    try:
        code, checks, _ = await doctor(cfg)
    finally:
        await runner.cleanup()
    assert code == 1
    assert checks["port"]["status"] == "fail" and "not a kith daemon" in checks["port"]["detail"]
    assert checks["redis"]["status"] == "fail"
    assert checks["model main"]["status"] == "fail" and "unreachable" in checks["model main"]["detail"]
    assert checks["data dir"]["status"] == "warn"
    assert not data_dir.exists()  # doctor never creates anything


async def test_an_invalid_config_exits_2(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "kith.yaml", {"server": {"port": "many"}, "nonsense": 1})
    code, checks, err = await doctor(cfg)
    assert code == 2 and checks["config"]["status"] == "fail"
    assert "nonsense" in err


async def test_timeout_bounds_a_probe_that_never_answers(tmp_path: Path) -> None:
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accepts, reads nothing, answers nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = write_config(tmp_path / "kith.yaml", {"data_dir": str(tmp_path / "d"), "server": {"port": port},
                                                "llm": {"provider": "echo"}})  # fmt: skip
    try:
        started = time.monotonic()
        code, checks, _ = await doctor(cfg, timeout=0.5)
        took = time.monotonic() - started
    finally:
        for w in held:
            w.close()
        server.close()
    assert code == 1 and checks["port"]["status"] == "fail", checks
    assert took < 30  # bounded by --timeout, not by aiohttp's default of 5 minutes
    code, _, err = await kith("-c", str(cfg), "doctor", "--timeout", "0")
    assert code == 2 and "--timeout must be more than 0" in err
