"""Issue 28, "Failures are visible": the console's "Needs attention" view lists the memory jobs that
gave up (a writer job whose model answers were unusable, dead-lettered for real through the bus), and
the operator retries one (it runs again and its work lands) and discards another."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.ops.test_doctor_memory_jobs import WRITER_MARK, start, unusable_writer
from tests.web.console_support import browser, goto_view, open_console, shot

__all__ = ["browser"]
pytestmark = pytest.mark.browser


async def test_the_operator_retries_and_discards_dead_memory_jobs(
    browser: Any, make_gateway: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    calls: list[int] = []
    fake_anthropic.responders.append(unusable_writer(calls))
    gw, sid = await start(make_gateway, anthropic_llm, backoff_s=0)
    assert gw.bus is not None
    job = f"writer-test:{sid}"
    for _ in range(200):  # bounded: five tries without backoff
        await gw.settle()
        if [d for d in await gw.bus.dead() if d.job_id == job]:
            break
        await asyncio.sleep(0.05)
    assert len(calls) == 5 and gw.state.writer_progress.get(sid) == 0
    # A second dead memory job, of the index, that the operator will discard.
    await gw.bus.redis.xadd(gw.bus.keys.dead("memory.sync"), {
        "id": "sync-dead-1", "name": "memory.sync", "payload": '{"scope": "user:nobody"}', "v": "1", "enq": "0",
        "tries": "3", "error": "Traceback...\nOSError: disk full", "consumer": "c", "at": "1"})  # fmt: skip
    await gw.bus.redis.sadd(gw.bus.keys.queues, "memory.sync")

    page = await open_console(browser, gw, "desktop")
    await goto_view(page, "#/me/attention", "memory_writer")
    view = await page.text_content("#view") or ""
    assert job in view and "5 tries" in view and "WriterOutputError: unusable memory-writer output" in view
    assert "OSError: disk full" in view
    await shot(page, "desktop-needs-attention")

    await page.locator("ul.attention-list li", has_text="sync-dead-1").locator("button", has_text="Discard").click()
    await page.wait_for_selector("ul.attention-list li >> text=sync-dead-1", state="detached", timeout=10_000)
    assert [d.job_id for d in await gw.bus.dead()] == [job]

    # Answered well this time: the retried job runs and its summary lands.
    fake_anthropic.responders.clear()
    fake_anthropic.responders.append(lambda b: "SUMMARY:\nThe boat is at pier 17.\nPEOPLE:\n[]\nTOPICS:\n[]"
                                     if WRITER_MARK in FakeAnthropic.system_of(b) else None)  # fmt: skip
    await page.locator("ul.attention-list li", has_text=job).locator("button", has_text="Retry").click()
    await page.wait_for_selector("text=No memory job needs attention", timeout=10_000)
    for _ in range(200):
        await gw.settle()
        if gw.state.writer_progress.get(sid) > 0:
            break
        await asyncio.sleep(0.05)
    assert gw.state.writer_progress.get(sid) > 0
    assert page.kith_errors == []
