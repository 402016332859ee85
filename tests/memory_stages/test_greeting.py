"""Seed 003 ``proactive_session_greeting``: the first message after a long gap asks the model to pick up
the last thread, once per session, never in a group or off the record."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.memory.files import working
from plugins.profile import GREETING
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg

LINKS = [{"user": "ada", "accounts": ["websocket:ada"]}]


async def test_the_greeting_comes_once_after_a_gap_and_never_in_groups_or_otr(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=LINKS, memory={"proactive_session_greeting": True})
    start = datetime.now(UTC)

    def at(text: str, hours: float, **kw: Any) -> Any:
        return replace(msg(text, **kw), timestamp=start + timedelta(hours=hours))

    async with Gateway(cfg, entry_points=False) as gw:
        working.write(gw.memory.stores.for_user("ada"), "Ada is planning the Oslo trip.", now=start, ttl_days=14,
                      source="test")
        room = gw.memory.stores.for_channel("websocket:club")
        working.write(room, "The club picks a book.", now=start, ttl_days=14, source="test")
        await gw.handle_inbound(at("morning!", 0))
        assert GREETING in last_turn_system(fake_anthropic)
        await gw.handle_inbound(at("and the ferry?", 0.1))
        assert GREETING not in last_turn_system(fake_anthropic)  # once per session
        gap = gw.config.sessions.idle_minutes / 60 + 1
        await gw.handle_inbound(at("back again", gap))  # a long gap: a new session
        assert GREETING in last_turn_system(fake_anthropic)
        await gw.handle_inbound(at("hello club", gap, group="club"))  # a group's first message
        system = last_turn_system(fake_anthropic)
        assert "The club picks a book." in system and GREETING not in system
        await gw.handle_inbound(at("/otr on", 2 * gap + 1))
        await gw.handle_inbound(at("just between us", 2 * gap + 1.01))
        system = last_turn_system(fake_anthropic)
        assert "Off-The-Record" in system and GREETING not in system
