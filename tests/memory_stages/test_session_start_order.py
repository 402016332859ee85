"""Seed 003's injection order: the base prompt (the persona), then "Who you're talking to" (the
profile), then "Recent context" (working memory), then the per-turn memory (recall)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg
from tests.memory_stages.test_working_memory import ada_working_memory, config


async def test_persona_then_profile_then_working_memory_then_recall(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    async with Gateway(config(tmp_path, anthropic_llm), entry_points=False) as gw:
        store = ada_working_memory(gw, "## Working on\nThe Oslo trip (WORKING-MARK).", written_ago=timedelta(hours=2))
        store.write("USER.md", "# Ada\n\n- Lives in Bergen (PROFILE-MARK).\n", source="test")
        store.write("topics/ferries.md", "# Ferries\n\nThe Oslo ferry leaves at 19:00 from Hjortneskaia "
                    "(RECALL-MARK).\n", source="test")
        await gw.settle()
        await gw.handle_inbound(msg("When does the Oslo ferry leave?"))
        system = last_turn_system(fake_anthropic)
        at = [system.index(mark) for mark in ("Who you're talking to", "PROFILE-MARK", "Recent context (working memory",
                                              "WORKING-MARK", "RECALL-MARK")]
        assert at == sorted(at)
        assert system.index(", a personal assistant.") < at[0]  # the persona's IDENTITY.md comes first
