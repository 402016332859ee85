"""``kith jobs`` and ``kith worker`` against a bus owned by a "daemon" (this test process)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.bus import JobContext
from gateway.cli.main import main
from gateway.configread import load_config

from .conftest import eventually, new_bus, running, spec

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, **extra: Any) -> Path:
    data = {
        "data_dir": str(tmp_path / "data"),
        "llm": {"provider": "echo"},
        "plugins": {"entry_points": False, "modules": ["tests.bus.plugin_jobs"]},
        "bus": {"claim_idle_ms": 500, "retry_backoff_s": 0.01, "shutdown_grace_s": 5},
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def kith(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_jobs_status_dead_retry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = write_config(tmp_path)
    config = load_config(cfg_path)
    fail = True

    async def handler(ctx: JobContext, payload: dict[str, Any]) -> None:
        if fail:
            raise RuntimeError("backend unavailable")

    async def fine(ctx: JobContext, payload: dict[str, Any]) -> None:
        return None

    bus = await new_bus(config, [spec("reindex", handler, max_tries=2), spec("idle", fine)])
    try:
        for n in range(3):
            await bus.enqueue("idle", {"n": n})
        code, out, _ = await kith(capsys, "-c", str(cfg_path), "jobs", "status", "--json")
        rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
        assert code == 0 and rows["idle"]["pending"] == 3 and rows["idle"]["oldest_age_s"] >= 0

        async with running(bus):
            await bus.enqueue("reindex", {"user_id": "ann"}, job_id="reindex:ann")
            await eventually(bus.dead)
            code, out, _ = await kith(capsys, "-c", str(cfg_path), "jobs", "dead")
            assert code == 0 and "reindex:ann  reindex  tries=2" in out and "backend unavailable" in out
            code, out, _ = await kith(capsys, "-c", str(cfg_path), "jobs", "status")
            assert "reindex" in out and "QUEUE" in out
            fail = False
            code, out, _ = await kith(capsys, "-c", str(cfg_path), "jobs", "retry", "reindex:ann")
            assert code == 0 and "queued reindex:ann again" in out
            await eventually(lambda: _no_dead(bus))
        code, _, err = await kith(capsys, "-c", str(cfg_path), "jobs", "retry", "reindex:ann")
        assert code == 1 and "no dead letter" in err
    finally:
        await bus.close()


async def _no_dead(bus: Any) -> bool:
    return await bus.dead() == [] and await bus.redis.xlen(bus.keys.stream("reindex")) == 0


async def test_jobs_without_a_daemon_explains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = await kith(capsys, "-c", str(write_config(tmp_path)), "jobs", "status")
    assert code == 1 and "start `kith run`" in err


@pytest.mark.long
async def test_kith_worker_processes_run_plugin_jobs(tmp_path: Path) -> None:
    """Two ``kith worker`` processes attach to the daemon's embedded server, run jobs registered by a
    plugin through the hook, and exit cleanly on SIGTERM."""
    cfg_path = write_config(tmp_path)
    config = load_config(cfg_path)
    bus = await new_bus(config)  # the "daemon": owns the embedded server
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.cli.main",
            "-c",
            str(cfg_path),
            "worker",
            "--concurrency",
            "2",
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    try:
        # SIGTERM before a worker has installed its handlers would kill it mid-import: wait for both
        # to say they are ready.
        for p in procs:
            assert p.stdout is not None
            line = await asyncio.wait_for(p.stdout.readline(), 60)
            assert line.startswith(b"kith worker:"), line
        outs = [tmp_path / f"out{n}" for n in range(20)]
        for n, path in enumerate(outs):
            await bus.enqueue("touch", {"path": str(path)}, job_id=f"touch:{n}")
        await eventually(lambda: all(p.exists() for p in outs), timeout=30)
        pids = {p.read_text().split()[0] for p in outs}
        assert pids <= {str(p.pid) for p in procs}
        assert {p.read_text().split(maxsplit=1)[1] for p in outs} == {"Gateway 1"}
    finally:
        for p in procs:
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        codes = [await asyncio.wait_for(p.wait(), 20) for p in procs]
        await bus.close()
    assert codes == [0, 0]
