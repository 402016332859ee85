"""Seed 001's people lookup is the read path's floor: each file is cut to its budget, the files
surface whatever the other tiers do (the filter keeps nothing, recall is skipped), and an overflowing
prompt cuts them from the tail (mentions, then participants, the speaker last)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.turn.budget import TRIM_PEOPLE, render_section, sent_tokens
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.memory_stages.conftest import last_turn_system, msg
from tests.memory_stages.test_filter_tier import QUESTION, _config, _recorded_filter, _seeded
from tests.memory_stages.test_prompt_assembly import Capture


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


async def test_on_overflow_mentions_go_first_then_participants_and_the_speaker_survives(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    capture = Capture()
    cfg = make_config(tmp_path, llm=anthropic_llm, memory={"people_file_tokens": 400})
    async with Gateway(cfg, plugins=(capture,), entry_points=False) as gw:
        room = gw.memory.stores.for_channel("websocket:band")
        for slug, name in (("websocket-ada", "ADA"), ("websocket-bo", "BO"), ("websocket-cy", "CY"),
                           ("telegram-77", "DEE")):
            filler = "".join(f"- {name.title()} rehearsal note {i} about the setlist.\n" for i in range(8))
            room.write(f"people/{slug}.md", f"# {name.title()}\n{name}-HEAD\n{filler}{name}-TAIL\n", source="test")
        room.write("people/_aliases.json", json.dumps({"dee": "telegram-77"}), source="test")
        await gw.handle_inbound(msg("hi all", account="bo", group="band"))
        await gw.handle_inbound(msg("hello", account="cy", group="band"))
        ask = "Did Dee book the gig?"
        await gw.handle_inbound(msg(ask, account="ada", group="band"))

        def people(assembled: Any) -> str:
            return next((s.text for s in assembled.sections if s.source == "memory.people"), "")

        roomy = capture.assembled[-1]
        whole = next(s for s in roomy.sections if s.source == "memory.people")
        # Speaker, recent participants (newest first), the mention: the order the tail is cut from.
        order = ["ADA", "CY", "BO", "DEE"]
        marks = [whole.text.index(f"{n}-{end}") for n in order for end in ("HEAD", "TAIL")]
        assert marks == sorted(marks) and not any(t.source == "memory.people" for t in roomy.trims)
        # Sections cut before people (recalled, facts, dated) absorb the first part of any overflow.
        before_people = sum(sent_tokens(s) for s in roomy.sections if s.trim_rank < TRIM_PEOPLE and not s.protected)
        rendered = render_section(whole)

        for cut_in, kept, gone in ((3, ["ADA", "CY", "BO"], []), (2, ["ADA", "CY"], ["DEE"]),
                                   (1, ["ADA"], ["BO", "DEE"])):
            name = order[cut_in]
            head, tail = rendered.index(f"{name}-HEAD"), rendered.index(f"{name}-TAIL")
            keep_tokens = (head + tail) // 2 // 4  # the budget ends in the middle of this person's notes
            gw.config.context.budget_tokens = roomy.total_tokens - before_people - (sent_tokens(whole) - keep_tokens)
            await gw.handle_inbound(msg(ask, account="ada", group="band"))
            text = people(capture.assembled[-1])
            assert any(t.source == "memory.people" and t.reason == "total budget"
                       for t in capture.assembled[-1].trims), (name, capture.assembled[-1].trims)
            assert all(f"{n}-TAIL" in text for n in kept), (name, text)  # everyone before the cut, whole
            assert f"{name}-TAIL" not in text, (name, text)  # the file the budget ends in, cut at its tail
            assert not any(f"{n}-HEAD" in text for n in gone), (name, text)  # everyone after it, dropped
