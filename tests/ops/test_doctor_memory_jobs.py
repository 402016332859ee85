"""Issue 28, "Failures are visible": a memory-writer job whose answers are unusable no longer fails
quietly. ``kith doctor`` warns about it (count and last error) while it is retried again and again and
once it is dead-lettered, and ``/healthz`` shows the memory pipeline's state and says degraded."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from gateway.app import Gateway
from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import msg
from tests.ops.test_doctor import doctor, write_config
from tests.storage import select_one

WRITER_MARK = "long-term memory of a personal assistant"
UNUSABLE = "PEOPLE:\n[]\nTOPICS:\n[]"  # no SUMMARY: the writer fails the job, having written nothing


def unusable_writer(calls: list[int]) -> Callable[[dict[str, Any]], str | None]:
    def respond(body: dict[str, Any]) -> str | None:
        if WRITER_MARK not in FakeAnthropic.system_of(body):
            return None
        calls.append(1)
        return UNUSABLE

    return respond


async def start(make_gateway: GatewayFactory, anthropic_llm: dict[str, Any], backoff_s: float) -> tuple[Gateway, str]:
    background = {"writer": {"turn_threshold": 1000, "idle_seconds": 3600}, "sleep": {"enabled": False}}
    bus = {"retry_backoff_s": backoff_s, "retry_backoff_max_s": backoff_s, "claim_idle_ms": 2000}
    gw = await make_gateway(llm=anthropic_llm, background=background, bus=bus)
    os.chmod(gw.data_dir, 0o700)
    await gw.handle_inbound(msg("The boat is at pier 17."))
    sid = str(select_one(gw.state, "SELECT session_id FROM sessions")[0])
    assert gw.bus is not None
    await gw.bus.enqueue("memory_writer", {"session_id": sid, "reason": "test"}, job_id=f"writer-test:{sid}")
    return gw, sid


def config_of(gw: Gateway, tmp_path: Path) -> Path:
    return write_config(tmp_path / "kith.yaml", {"data_dir": str(gw.data_dir), "llm": {"provider": "echo"},
                                                 "server": {"port": gw.port}, "memory": {"min_free_mb": 1}})


async def healthz(gw: Gateway) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{gw.port}/healthz") as resp:
        body: dict[str, Any] = await resp.json()
        return body


async def test_doctor_and_healthz_show_a_dead_lettered_writer_job(
    make_gateway: GatewayFactory, anthropic_llm: dict[str, Any], fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    calls: list[int] = []
    fake_anthropic.responders.append(unusable_writer(calls))
    gw, sid = await start(make_gateway, anthropic_llm, backoff_s=0)
    assert gw.bus is not None
    for _ in range(200):  # bounded: five tries without backoff
        await gw.settle()
        if [d for d in await gw.bus.dead() if d.job_id == f"writer-test:{sid}"]:
            break
        await asyncio.sleep(0.05)
    assert len(calls) == 5 and gw.state.writer_progress.get(sid) == 0

    cfg = config_of(gw, tmp_path)
    code, checks, err = await doctor(cfg)
    assert code == 0, (checks, err)  # a warning, not a failure: the install itself is fine
    check = checks["memory jobs"]
    assert check["status"] == "warn", checks
    assert "1 memory job(s) dead-lettered (memory_writer 1)" in check["detail"]
    assert f"memory_writer writer-test:{sid}: " in check["detail"]
    assert "WriterOutputError: unusable memory-writer output" in check["detail"]

    body = await healthz(gw)
    assert body["status"] == "degraded"
    assert body["memory_jobs"]["dead"] == 1 and body["memory_jobs"]["dead_by_job"] == {"memory_writer": 1}
    assert any("memory job(s) dead-lettered" in p for p in body["degraded"])
    # /metrics has the same state, per job.
    from gateway.ops.scrape import render_levels

    metrics = (await render_levels(gw)).decode()
    assert 'kith_memory_jobs_dead{job="memory_writer"} 1.0' in metrics
    assert 'kith_scrape_errors{part="memory_jobs"} 0.0' in metrics

    # Retried by the operator and answered well this time: the warning goes.
    fake_anthropic.responders.clear()
    fake_anthropic.responders.append(lambda b: "SUMMARY:\nThe boat is at pier 17.\nPEOPLE:\n[]\nTOPICS:\n[]"
                                     if WRITER_MARK in FakeAnthropic.system_of(b) else None)  # fmt: skip
    assert await gw.bus.retry(f"writer-test:{sid}") == "queued"
    for _ in range(200):
        await gw.settle()
        if gw.state.writer_progress.get(sid) > 0:
            break
        await asyncio.sleep(0.05)
    code, checks, err = await doctor(cfg)
    assert checks["memory jobs"]["status"] == "ok", checks


async def test_doctor_warns_about_a_writer_job_that_keeps_failing_before_it_is_dead(
    make_gateway: GatewayFactory, anthropic_llm: dict[str, Any], fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    calls: list[int] = []
    fake_anthropic.responders.append(unusable_writer(calls))
    # Retries 3-6 s apart: the job is seen between its second and fifth try.
    gw, sid = await start(make_gateway, anthropic_llm, backoff_s=6)
    assert gw.bus is not None
    key = gw.bus.keys.job(f"writer-test:{sid}")
    for _ in range(400):  # bounded: two tries and one backoff
        if int(await gw.bus.redis.hget(key, "prior") or 0) >= 2:
            break
        await asyncio.sleep(0.05)
    cfg = config_of(gw, tmp_path)
    code, checks, err = await doctor(cfg)
    assert code == 0, (checks, err)
    detail = checks["memory jobs"]["detail"]
    assert checks["memory jobs"]["status"] == "warn" and "failing repeatedly (memory_writer 1)" in detail, checks
    assert f"memory_writer writer-test:{sid} (" in detail and "unusable memory-writer output" in detail
    assert "dead-lettered" not in detail
