"""Seed 001's people lookup is the read path's floor: each file is cut to its budget, and the files
surface whatever the other tiers do (the filter keeps nothing, recall is skipped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.memory_stages.conftest import last_turn_system, msg
from tests.memory_stages.test_filter_tier import QUESTION, _config, _recorded_filter, _seeded


async def test_a_people_file_is_cut_to_its_budget_from_the_end(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = _config(tmp_path, anthropic_llm, None)
    cfg.memory.people_file_tokens = 60
    async with Gateway(cfg, entry_points=False) as gw:
        filler = "".join(f"- Ada mentioned detail number {i} about the allotment.\n" for i in range(60))
        gw.memory_store("ada").write("people/websocket-ada.md", "# Ada\n\nHEAD-MARK keeps bees.\n" + filler
                                     + "TAIL-MARK\n", source="test")
        await gw.handle_inbound(msg("Hello there"))
        system = last_turn_system(fake_anthropic)
        people = system[system.index("People in this conversation"):].split("\n--- ")[0]
        assert "HEAD-MARK" in people and "TAIL-MARK" not in people
        assert len(people) < 60 * 4 * 2  # about 60 tokens (4 characters each), with the title and quoting


async def test_people_surface_when_the_filter_keeps_nothing(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    async with FakeOpenAI() as cheap, Gateway(_config(tmp_path, anthropic_llm, cheap), entry_points=False) as gw:
        gw.memory_store("ada").write("people/websocket-ada.md", "# Ada\n\nAda keeps bees (PEOPLE-MARK).\n",
                                     source="test")
        await _seeded(gw)
        cheap.enqueue("KEEP: none", kind="recall_filter")
        await gw.handle_inbound(msg(QUESTION))
        decision = _recorded_filter(gw)
        assert decision["outcome"] == "used" and decision["kept"] == []
        system = last_turn_system(fake_anthropic)
        assert "PEOPLE-MARK" in system and "lapsang souchong" not in system
