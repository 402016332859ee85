"""Dated memories in the read path (issue 18, seed 004): the last N days of ``memories/YYYY-MM-DD.md``
load at session start, on the person's own calendar, newest first, within their budget and trim rank,
and recall does not quote them a second time."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.memory.files import dated
from gateway.turn.budget import TRIM_DATED
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg

LINKS = [{"user": "ada", "accounts": ["websocket:ada"]}]
# 23:30 UTC on 10 May is already 11 May in Berlin: the window is 9-11 May there, 8-10 May in UTC.
NOW = datetime(2026, 5, 10, 23, 30, tzinfo=UTC)
FILES = {
    "memories/2026-05-11.md": "# 2026-05-11\n- Ada booked the ferry to Bergen (local today).\n",
    "memories/2026-05-10.md": "# 2026-05-10\n- Ada finished the lighthouse chapter.\n",
    "memories/2026-05-09.md": "# 2026-05-09\n- Ada repotted the fig tree.\n",
    "memories/2026-05-08.md": "# 2026-05-08\n- Ada lost her umbrella on the tram.\n",
    "memories/notes.md": "# Not a day\n- undated scratch in memories/ never loads as a day.\n",
}


def test_window_and_order(tmp_path: Path) -> None:
    from gateway.memory.files.store import MemoryStore

    store = MemoryStore(tmp_path)
    for rel, text in FILES.items():
        store.write(rel, text, source="test")
    store.write("memories/2026-05-07.md", "   \n", source="test")  # empty: skipped
    days = dated.recent(store, date(2026, 5, 10), 3)
    assert [d.isoformat() for d, _ in days] == ["2026-05-10", "2026-05-09", "2026-05-08"]
    text = dated.section_text(days)
    assert text.index("Sunday 10 May 2026") < text.index("Friday 08 May 2026")
    assert "# 2026-05-10" not in text  # the file's own title gives way to the day heading
    assert dated.recent(store, date(2026, 5, 10), 0) == []
    assert dated.in_window("memories/2026-05-10.md", date(2026, 5, 10), 1)
    assert not dated.in_window("memories/2026-05-09.md", date(2026, 5, 10), 1)
    assert not dated.in_window("sessions/2026-05-10.md", date(2026, 5, 10), 3)
    assert not dated.in_window("memories/2026-02-30.md", date(2026, 3, 1), 5)


async def test_last_days_load_at_session_start_in_the_persons_zone(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=LINKS,
                      memory={"dated_days": 3, "dated_budget_tokens": 800})
    async with Gateway(cfg, entry_points=False) as gw:
        gw.state.users.ensure("ada", display_name="Ada", timezone="Europe/Berlin")
        assert gw.state.users.set_timezone("ada", "Europe/Berlin")
        store = gw.memory_store("ada")
        late = "memories/2026-05-09.md"
        for rel, text in FILES.items():
            if rel != late:
                store.write(rel, text, source="test")
        await gw.settle()
        question = msg("What did I do on the ferry and with the chapter?")
        await gw.handle_inbound(replace(question, timestamp=NOW))
        system = last_turn_system(fake_anthropic)
        assert "Dated memories" in system
        for line in ("ferry to Bergen", "lighthouse chapter"):
            assert system.count(line) == 1, line  # loaded once: recall does not quote them again
        section = system.split("Dated memories")[1].split("\n---")[0]
        assert "umbrella" not in section  # 8 May is outside Berlin's window (9-11 May)
        assert "undated scratch" not in section
        assert section.index("ferry to Bergen") < section.index("lighthouse chapter")  # newest first

        # Written after the session started: not in its frozen snapshot, so recall may bring it.
        store.write(late, FILES[late], source="test")
        await gw.settle()
        await gw.handle_inbound(replace(msg("When did I repot the fig tree?"), timestamp=NOW))
        system = last_turn_system(fake_anthropic)
        section = system.split("Dated memories")[1].split("\n---")[0]
        assert "fig tree" not in section and system.count("repotted the fig tree") == 1


async def test_over_budget_the_oldest_day_goes_first(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=LINKS,
                      memory={"dated_days": 2, "dated_budget_tokens": 60, "recall_k": 0})
    async with Gateway(cfg, entry_points=False) as gw:
        store = gw.memory_store("ada")
        today = datetime.now(UTC).date()
        older = today.fromordinal(today.toordinal() - 1)
        store.write(f"memories/{today}.md", "- Newest: " + "harbour " * 30 + "\n", source="test")
        store.write(f"memories/{older}.md", "- Oldest: " + "meadow " * 60 + "\n", source="test")
        await gw.settle()
        await gw.handle_inbound(msg("hello"))
        system = last_turn_system(fake_anthropic)
        assert "Newest: harbour" in system and "Oldest: meadow" not in system
        sections = [s for s in _sections(gw) if s.source == "memory.dated"]
        assert sections and sections[0].trim_rank == TRIM_DATED and sections[0].budget == 60


def _sections(gw: Gateway) -> list[Any]:
    from plugins.profile import SNAPSHOTS

    return [section for snap in gw.stash[SNAPSHOTS].values() for _, section in snap.sections]
