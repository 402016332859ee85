"""The recall filter tier (issue 18, seed tier 3): one cheap-model call keeps and orders the recalled
memories under a deadline, and a slow, failing or absent model leaves the hybrid ranking as it was.

The cheap role is a local OpenAI-compatible server (the fake speaks the real wire protocol); the turn
itself goes to the fake Anthropic server. What the filter decided is read where a person reads it:
the turn's context record (the console) and ``kith context`` (``gateway.turn.explain``)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.cli.context import render
from gateway.memory.search.filter_tier import parse
from gateway.turn.explain import explain
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_server import API_KEY as OPENAI_KEY
from tests.fakes.openai_server import FakeOpenAI
from tests.memory_stages.conftest import last_turn_system, msg
from tests.storage import select_rows

LINKS = [{"user": "ada", "accounts": ["websocket:ada"]}]
NOTES = {
    "topics/garden.md": "# Garden\n\nThe tomatoes in the garden were planted in April along the south fence.\n",
    "topics/tea.md": "# Tea\n\nAda drinks lapsang souchong tea every morning in the garden.\n",
    "topics/boat.md": "# Boat\n\nThe rowing boat on the garden pond needs new paint before summer.\n",
}
QUESTION = "What do I drink in the garden every morning?"


def _config(tmp_path: Path, anthropic_llm: dict[str, Any], cheap: FakeOpenAI | None, **filter_tier: Any) -> Any:
    llm = dict(anthropic_llm)
    if cheap is not None:
        llm["roles"] = {"cheap": {"provider": "openai", "base_url": cheap.url, "api_key": OPENAI_KEY,
                                  "model": "fake-mini", "max_retries": 0, "timeout_s": 10}}
    return make_config(tmp_path, llm=llm, identity_links=LINKS,
                       memory={"filter_tier": {"deadline_ms": 300, **filter_tier}})


async def _seeded(gw: Gateway) -> None:
    store = gw.memory_store("ada")
    for rel, text in NOTES.items():
        store.write(rel, text, source="test")
    await gw.settle()


def _recorded_filter(gw: Gateway) -> dict[str, Any]:
    rows = select_rows(gw.state, "SELECT data FROM turn_contexts ORDER BY created_at")
    assert rows, "the turn's context record was not stored"
    return json.loads(rows[-1]["data"])["recall_filter"]


def _filter_requests(cheap: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in cheap.requests if "Snippets:" in json.dumps(r)]


async def test_slow_failing_and_working_filter_models(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    """One gateway, four turns: a model past the deadline, a failing one, an unreadable answer, a choice."""
    async with FakeOpenAI() as cheap, Gateway(_config(tmp_path, anthropic_llm, cheap), entry_points=False) as gw:
        await _seeded(gw)

        # 1. Answers after 4 s, long past the 300 ms deadline: the turn does not wait for it.
        cheap.enqueue("KEEP: 3", delay_s=4.0, kind="recall_filter")
        started = time.perf_counter()
        reply = await gw.handle_inbound(msg(QUESTION))
        elapsed = time.perf_counter() - started
        assert reply is not None and reply.text.startswith("fake-claude heard")
        decision = _recorded_filter(gw)
        assert decision["outcome"] == "timeout" and decision["backend"] == "cheap"
        assert 250 <= decision["latency_ms"] < 3000  # the deadline, not the model's 4 s
        # Generous (a loaded parallel run is slow), but waiting for the model would take >= 4 s.
        assert elapsed < 3.5
        assert len(_filter_requests(cheap)) == 1
        # The hybrid ranking went to the prompt unchanged: every note is there, tea included.
        system = last_turn_system(fake_anthropic)
        assert "lapsang souchong" in system and "rowing boat" in system

        # 2. A server error: the hybrid ranking again, and the reason on record.
        cheap.enqueue_error(500, kind="recall_filter")
        reply = await gw.handle_inbound(msg(QUESTION + " (again)"))
        assert reply is not None and reply.text.startswith("fake-claude heard")
        decision = _recorded_filter(gw)
        assert decision["outcome"] == "error" and "500" in decision["reason"]
        assert "lapsang souchong" in last_turn_system(fake_anthropic)

        # 3. An answer that is no KEEP line (the fake's default echo), seen through `kith context`,
        # which runs the same stage; its numbering is the ranking's, so read the tea note's number.
        x = await explain(gw, user_id="ada", channel="websocket", text=QUESTION)
        assert x["recall_filter"]["outcome"] == "error" and "unreadable answer" in x["recall_filter"]["reason"]
        assert "recall filter: error" in render(x)
        content = _filter_requests(cheap)[-1]["messages"][-1]["content"]
        text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
        numbered = [line for line in text.splitlines() if line.startswith("[")]
        assert len(numbered) == 3
        tea = next(line for line in numbered if "lapsang" in line)

        # 4. The model keeps the tea note only: the prompt gets exactly that.
        cheap.enqueue(f"KEEP: {tea[1:tea.index(']')]}", kind="recall_filter")
        await gw.handle_inbound(msg(QUESTION + " (once more)"))
        decision = _recorded_filter(gw)
        assert decision["outcome"] == "used" and len(decision["kept"]) == 1 and decision["candidates"] == 3
        system = last_turn_system(fake_anthropic)
        assert "lapsang souchong" in system and "rowing boat" not in system and "tomatoes" not in system


async def test_off_without_a_model_of_its_own_and_shown_by_kith_context(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    async with Gateway(_config(tmp_path, anthropic_llm, None), entry_points=False) as gw:
        await _seeded(gw)
        x = await explain(gw, user_id="ada", channel="websocket", text=QUESTION)
        assert x["recall_filter"]["outcome"] == "off"
        assert x["recall_filter"]["kept"]  # the hybrid hits, as before the tier existed
        assert "recall filter: off" in render(x)
        await gw.handle_inbound(msg(QUESTION))
        assert _recorded_filter(gw)["outcome"] == "off"
        assert len(fake_anthropic.requests) == 1  # no filter call went to the main model either


async def test_a_model_that_keeps_missing_the_deadline_is_stood_down_then_tried_again(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    """Each missed deadline costs the turn the whole deadline (and holds up a one-slot local server):
    after ``stand_down_after`` misses in a row the model is not asked, then tried again."""
    # A 1 s deadline: the answers in time must be in time on a loaded machine too (one at 300 ms was not).
    async with FakeOpenAI() as cheap, Gateway(_config(tmp_path, anthropic_llm, cheap, stand_down_after=2,
                                                      stand_down_s=1.5, deadline_ms=1000),
                                              entry_points=False) as gw:  # fmt: skip
        await _seeded(gw)
        for i in range(2):
            cheap.enqueue("KEEP: 1", delay_s=3.0, kind="recall_filter")
            await gw.handle_inbound(msg(f"{QUESTION} ({i})"))
            assert _recorded_filter(gw)["outcome"] == "timeout"
        await gw.handle_inbound(msg(QUESTION + " (stood down)"))
        decision = _recorded_filter(gw)
        assert decision["outcome"] == "off" and "missed the 1000 ms deadline 2 times in a row" in decision["reason"]
        assert len(_filter_requests(cheap)) == 2  # not asked
        assert "lapsang souchong" in last_turn_system(fake_anthropic)  # the hybrid ranking, as without a filter
        x = await explain(gw, user_id="ada", channel="websocket", text=QUESTION)
        assert "recall filter: off" in render(x) and "stood down" in render(x)

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _recorded_filter(gw)["outcome"] == "off":
            await asyncio.sleep(0.5)  # the pause runs out: the next turn asks again, and an answer in time counts
            cheap.enqueue("KEEP: 1", kind="recall_filter")
            await gw.handle_inbound(msg(QUESTION + " (later)"))
        assert _recorded_filter(gw)["outcome"] == "used"
        assert len(_filter_requests(cheap)) == 3


@pytest.mark.parametrize(("answer", "expected"), [
    ("KEEP: 3, 1", [2, 0]),
    ("keep:2,2,9,1", [1, 0]),  # duplicates and numbers out of range dropped
    ("KEEP: none", []),
    ("Sure! KEEP: 4", [3]),
    ("I think 2 and 3", None),
    ("KEEP: the second one", None),
])
def test_parse(answer: str, expected: list[int] | None) -> None:
    assert parse(answer, 4) == expected


async def test_the_filter_may_escalate_once_to_a_literal_search(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    """Seed 001's grep escalation: the ranked candidates miss, the model asks for a literal search, the
    matching lines join the candidates for a second call (two at most, one deadline for both)."""
    async with FakeOpenAI() as cheap, Gateway(_config(tmp_path, anthropic_llm, cheap, deadline_ms=5000),
                                              entry_points=False) as gw:
        await _seeded(gw)
        gw.memory_store("ada").write("notes.md", "# Notes\n\n- Shelf: a narwhal figurine, Sven.\n", source="test")
        await gw.settle()
        cheap.enqueue("GREP: narwhal", kind="recall_filter")
        cheap.enqueue("GREP: again", kind="recall_filter")  # a second escalation is not offered: unreadable
        await gw.handle_inbound(msg("What was that sea creature on my shelf called again?"))
        first, second = _filter_requests(cheap)[-2:]
        assert "GREP:" in json.dumps(first) and "GREP:" not in json.dumps(second["messages"][0])
        prompt = second["messages"][-1]["content"]
        prompt = prompt if isinstance(prompt, str) else " ".join(p.get("text", "") for p in prompt)
        numbered = [line for line in prompt.splitlines() if line.startswith("[")]
        shelf = next(line for line in numbered if "narwhal figurine" in line)
        assert "(notes.md)" in shelf or "(notes.md," in shelf
        decision = _recorded_filter(gw)
        assert decision["grep"] == "narwhal" and decision["outcome"] == "error"  # the second answer was no KEEP

        cheap.enqueue("GREP: narwhal", kind="recall_filter")
        cheap.enqueue(f"KEEP: {shelf[1:shelf.index(']')]}", kind="recall_filter")
        await gw.handle_inbound(msg("What was that sea creature on my shelf called again?"))
        decision = _recorded_filter(gw)
        assert decision["outcome"] == "used" and decision["grep"] == "narwhal" and len(decision["kept"]) == 1
        assert "narwhal figurine, Sven" in last_turn_system(fake_anthropic)
