"""Seed 000: the date line is always in the system block unless the persona has inject_datetime: false."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg

DATE = "Current date and time:"


def last_system(fake: FakeAnthropic, text: str) -> str:
    """The system prompt of the last request for ``text`` (``turn_requests`` finds turns by the date
    line, which is what this test takes away)."""
    [*_, body] = [r for r in fake.requests if r["messages"][-1]["content"] == text]
    return fake.system_of(body)


async def test_a_persona_with_inject_datetime_false_never_sees_the_date(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    personas = {"channels": {"telegram": "storyteller"}, "inject_datetime": {"storyteller": False}}
    cfg = make_config(tmp_path, llm=anthropic_llm, personas=personas)
    async with Gateway(cfg, entry_points=False) as gw:
        await gw.handle_inbound(msg("What day is it?"))  # the default persona: the date is there
        assert DATE in last_turn_system(fake_anthropic)
        await gw.handle_inbound(msg("What day is it?", channel="telegram"))
        system = last_system(fake_anthropic, "What day is it?")
        assert DATE not in system and "--- System ---" not in system  # nothing else to say: no block
        await gw.handle_inbound(msg("/otr on", channel="telegram"))
        await gw.handle_inbound(msg("And now?", channel="telegram"))
        system = last_system(fake_anthropic, "And now?")
        assert DATE not in system and "Current mode: Off-The-Record" in system  # the mode line stays
