"""Seed 000: REMINDERS.md holds pending reminders and is surfaced from tier 2 up, not at tier 1."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg


async def test_pending_reminders_reach_the_prompt_from_tier_2(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, memory={"recall_k": 0},
                      identity_links=[{"user": "ada", "accounts": ["websocket:ada"]}])
    async with Gateway(cfg, entry_points=False) as gw:
        due = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        gw.memory_store("ada").write("REMINDERS.md", "# Reminders\n\n- [ ] water the plants (REMINDER-MARK) "
                                     f"<!-- reminder id=r1 due={due} -->\n", source="test")
        await gw.handle_inbound(msg("What is on my plate?", raw={"tier": 2}))
        system = last_turn_system(fake_anthropic)
        assert "Pending reminders" in system and "REMINDER-MARK" in system
        await gw.handle_inbound(msg("And now, briefly?", raw={"tier": 1}))
        assert "REMINDER-MARK" not in last_turn_system(fake_anthropic)
