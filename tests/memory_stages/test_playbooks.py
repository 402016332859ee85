"""Seed 004 playbooks: how this person wants X done, from playbooks/, recalled by relevance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.memory.files import playbooks
from gateway.memory.files.store import MemoryStore
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg

TRAVEL = "# Booking trips\n- Always book aisle seats.\n- Trains over planes under 600 km.\n"
REPORTS = "# Weekly reports\n- Bullet points, never more than five.\n"


def test_relevant_playbooks_best_first_and_unrelated_ones_left_out(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "ada")
    store.write("playbooks/travel.md", TRAVEL, source="test")
    store.write("playbooks/reports.md", REPORTS, source="test")
    store.write("playbooks/notes.txt", "booking booking booking", source="test")  # not a playbook
    found = playbooks.relevant(store, "Can you book me trains for the trip to Paris?", limit=3)
    assert [p.path for p in found] == ["playbooks/travel.md"]
    both = playbooks.relevant(store, "The weekly report about my train trips bookings", limit=3)
    assert [p.path for p in both] == ["playbooks/travel.md", "playbooks/reports.md"]  # title words count double
    assert playbooks.relevant(store, "What is the weather like?") == []
    assert playbooks.relevant(MemoryStore(tmp_path / "bo"), "book a trip") == []  # no playbooks/ folder


async def test_the_playbook_reaches_the_prompt_of_its_owner_only_and_not_in_groups(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    links = [{"user": "ada", "accounts": ["websocket:ada"]}, {"user": "bo", "accounts": ["websocket:bo"]}]
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=links)
    async with Gateway(cfg, entry_points=False) as gw:
        gw.memory_store("ada").write("playbooks/travel.md", TRAVEL, source="test")
        gw.memory_store("ada").write("playbooks/reports.md", REPORTS, source="test")
        await gw.handle_inbound(msg("Please book my trip to Lyon next week."))
        system = last_turn_system(fake_anthropic)
        assert "--- Playbooks (recalled data" in system and "Always book aisle seats." in system
        assert "never more than five" not in system  # not relevant to this message
        await gw.handle_inbound(msg("Please book my trip to Lyon next week.", account="bo"))
        assert "aisle seats" not in last_turn_system(fake_anthropic)  # another person's playbooks
        await gw.handle_inbound(msg("Please book my trip to Lyon next week.", group="club"))
        assert "aisle seats" not in last_turn_system(fake_anthropic)  # private, like the profile
