"""Seed 003: working memory is capped at ``working_memory_max_tokens``; a longer compaction summary is
cut before it is written, keeping its start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.memory.files import working
from gateway.turn.budget import estimate_tokens
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import COMPACTION_MARK, system_of
from tests.memory_stages.test_working_memory import chat_until_compacted, config

LONG = "## Working on\nThe Oslo trip (HEAD-MARK).\n" + "".join(
    f"- Step {i}: compare another ferry timetable for the Oslo crossing.\n" for i in range(400)) + "TAIL-MARK\n"


async def test_an_oversize_summary_is_cut_to_the_cap_before_it_is_written(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    fake_anthropic.responders.append(lambda body: LONG if COMPACTION_MARK in system_of(body) else None)
    cfg = config(tmp_path, anthropic_llm)
    cfg.memory.working_max_tokens = 200
    async with Gateway(cfg, entry_points=False) as gw:
        await chat_until_compacted(gw)
        wm = working.parse(gw.memory.stores.for_user("ada").read("WORKING.md"))
        assert wm is not None and "HEAD-MARK" in wm.body and "TAIL-MARK" not in wm.body
        assert estimate_tokens(wm.body) <= 200 < estimate_tokens(LONG)
