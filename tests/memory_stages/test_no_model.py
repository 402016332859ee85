"""With no API key, background jobs that need a model skip cleanly: no retries, no dead letters."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.app import Gateway
from tests.conftest import make_config
from tests.memory_stages.conftest import msg


async def test_jobs_needing_a_model_skip_without_dead_letters(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    cfg = make_config(tmp_path, llm={"provider": "anthropic"},
                      sessions={"compact_after_tokens": 50, "compact_keep_turns": 1},
                      background={"writer": {"turn_threshold": 2}})
    async with Gateway(cfg, entry_points=False) as gw:
        assert not gw.model_ready
        for i in range(6):
            reply = await gw.handle_inbound(msg(f"message {i} " + "words " * 40))
            assert reply is not None and reply.notice  # the no-model explanation
        for user in ("ada",):
            await gw.bus.enqueue("sleep_cycle", {"user_id": user})
            await gw.bus.enqueue("distill_mid", {"user_id": user, "force": True})
        await gw.settle()
        assert await gw.bus.dead() == []
        assert all(q.delayed == 0 for q in await gw.bus.status())  # nothing waiting to be retried
    skipped = [r.getMessage() for r in caplog.records if "no language model is configured" in r.getMessage()]
    assert len(skipped) == len(set(skipped)) >= 1  # said once per job, not once per run
