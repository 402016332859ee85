"""One deadline across the three read tiers (seed 001: the provider runs all three tiers within a
deadline): the people lookup starts it, hybrid recall and the filter tier spend from it.

The slow tier is the filter model, slowed at the wire (a local OpenAI-compatible fake answering late);
the spent budget is a controllable clock, not a sleep. Timing bounds are generous: they tell "waited
for the shared budget" from "waited for the slow model", seconds apart."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.memory.search import read_deadline
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.memory_stages.conftest import last_turn_system, msg
from tests.memory_stages.test_filter_tier import (
    QUESTION,
    _config,
    _filter_requests,
    _recorded_filter,
    _seeded,
)

ADA_NOTE = "# Ada\n\nAda keeps bees on the allotment (PEOPLE-MARK).\n"


async def _with_people(gw: Gateway) -> None:
    gw.memory_store("ada").write("people/websocket-ada.md", ADA_NOTE, source="test")
    await _seeded(gw)


async def test_the_filter_gets_what_the_read_deadline_left_not_its_own_deadline(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    async with FakeOpenAI() as cheap:
        cfg = _config(tmp_path, anthropic_llm, cheap, deadline_ms=10_000)
        cfg.memory.read_deadline_ms = 1500
        async with Gateway(cfg, entry_points=False) as gw:
            await _with_people(gw)
            # The filter alone may take 10 s; the model answers after 6 s; the read path has 1.5 s in all.
            cheap.enqueue("KEEP: 1", delay_s=6.0, kind="recall_filter")
            started = time.perf_counter()
            reply = await gw.handle_inbound(msg(QUESTION))
            elapsed = time.perf_counter() - started
            assert reply is not None and reply.text.startswith("fake-claude heard")
            assert len(_filter_requests(cheap)) == 1  # the filter ran, with what was left
            decision = _recorded_filter(gw)
            assert decision["outcome"] == "timeout" and "what the read deadline left" in decision["reason"]
            assert decision["latency_ms"] < 1500 + 100  # never more than the shared budget (plus scheduling)
            assert elapsed < 5.0  # generous; waiting for the model would be >= 6 s
            system = last_turn_system(fake_anthropic)
            assert "PEOPLE-MARK" in system and "lapsang souchong" in system  # people, and the hybrid ranking


async def test_a_spent_deadline_skips_recall_and_the_filter_but_never_the_people(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as cheap, Gateway(_config(tmp_path, anthropic_llm, cheap), entry_points=False) as gw:
        await _with_people(gw)
        # The clock the tiers read: the first read starts the turn's deadline at 0; every later one is
        # an hour on, as if the earlier tiers had spent the whole budget.
        ticks = itertools.chain([0.0], itertools.repeat(3600.0))
        monkeypatch.setattr(read_deadline, "clock", lambda: next(ticks))
        await gw.handle_inbound(msg(QUESTION))
        decision = _recorded_filter(gw)
        assert decision["outcome"] == "timeout" and "no time left of the read deadline" in decision["reason"]
        assert _filter_requests(cheap) == []  # no call made with no time to wait for it
        system = last_turn_system(fake_anthropic)
        assert "PEOPLE-MARK" in system  # the correctness floor
        assert "lapsang souchong" not in system and "rowing boat" not in system  # no recall section

        # With the clock running normally again, the same question recalls as before.
        monkeypatch.setattr(read_deadline, "clock", time.monotonic)
        cheap.enqueue("KEEP: 1", kind="recall_filter")
        await gw.handle_inbound(msg(QUESTION + " (again)"))
        assert _recorded_filter(gw)["outcome"] == "used"
        assert json.dumps(_filter_requests(cheap)).count("Snippets:") == 1
