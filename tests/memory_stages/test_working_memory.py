"""Issue 5 acceptance 1-2: compaction writes working memory; session start injects it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.config import Config
from gateway.memory.files import working
from gateway.memory.files.store import MemoryStore
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import COMPACTION_MARK, last_turn_system, msg, system_of, turn_requests
from tests.storage import select_one

SUMMARY = "## Working on\nAda is planning the Oslo trip; the ferry is booked for 3 March.\n## Open threads\n- hotel"


def summariser(body: dict[str, Any]) -> str | None:
    return SUMMARY if COMPACTION_MARK in system_of(body) else None


def config(tmp_path: Path, llm: dict[str, Any], **sessions: Any) -> Config:
    """Ada on two channels, compaction after a few short turns."""
    return make_config(
        tmp_path, llm=llm,
        sessions={"compact_after_tokens": 150, "compact_keep_turns": 2, **sessions},
        identity_links=[{"user": "ada", "accounts": ["websocket:ada", "telegram:1001"]}],
    )


@pytest.fixture
def cfg(tmp_path: Path, anthropic_llm: dict[str, Any]) -> Config:
    """``config`` on the fake model."""
    return config(tmp_path, anthropic_llm)


@pytest.fixture
async def gw(cfg: Config) -> AsyncIterator[Gateway]:
    """The daemon on ``cfg``, running for the test."""
    async with Gateway(cfg, entry_points=False) as gw:
        yield gw


def ada_working_memory(gw: Gateway, text: str, *, written_ago: timedelta) -> MemoryStore:
    """Ada's store, its WORKING.md holding ``text`` as compaction writes it, ``written_ago`` (it
    expires after 14 days)."""
    store = gw.memory.stores.for_user("ada")
    working.write(store, text, now=datetime.now(UTC) - written_ago, ttl_days=14, source="test")
    return store


async def chat_until_compacted(gw: Gateway, n: int = 8) -> None:
    for i in range(n):
        await gw.handle_inbound(msg(f"Planning note {i}: " + "we compare ferries and trains to Oslo. " * 4))
    await gw.settle()


async def test_compaction_writes_working_memory_and_replaces_older_turns(
    gw: Gateway, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.responders.append(summariser)
    await chat_until_compacted(gw)
    text = gw.memory.stores.for_user("ada").read("WORKING.md")
    wm = working.parse(text)
    assert wm is not None and "ferry is booked for 3 March" in wm.body
    assert wm.expires - wm.updated == timedelta(days=14)
    # The compaction prompt is the personal-assistant one, with the transcript quoted as data.
    job = next(r for r in fake_anthropic.requests if COMPACTION_MARK in system_of(r))
    assert "## Open threads" in system_of(job) and "<conversation>" in job["messages"][0]["content"]
    assert job["model"] == gw.config.llm.cheap_model

    await gw.handle_inbound(msg("And the hotel?"))
    body = turn_requests(fake_anthropic)[-1]
    # Older turns left the live history; their summary stands in for them; the newest stay verbatim.
    assert len(body["messages"]) < 2 * 8
    assert "Earlier in this conversation" in system_of(body) and "ferry is booked" in system_of(body)
    # The full transcript is kept.
    assert select_one(gw.state, "SELECT COUNT(*) AS n FROM turns")["n"] == 2 * 9


async def test_working_memory_survives_restart_and_follows_the_user_to_another_channel(
    cfg: Config, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.responders.append(summariser)
    async with Gateway(cfg, entry_points=False) as gw:
        await chat_until_compacted(gw)
    async with Gateway(cfg, entry_points=False) as gw:  # a daemon restart
        # The same session continues after the restart: its summary, not the working memory it wrote.
        await gw.handle_inbound(msg("Still there?", account="1001", channel="telegram"))
        system = last_turn_system(fake_anthropic)
        assert "Recent context (working memory" not in system
        assert system.count("ferry is booked for 3 March") == 1
        # The next session, on another channel of the same user, starts with the working memory.
        await gw.handle_inbound(msg("/new", account="1001", channel="telegram"))
        await gw.handle_inbound(msg("Hi again, where were we?", account="1001", channel="telegram"))
        system = last_turn_system(fake_anthropic)
        assert "Recent context (working memory" in system and "Earlier in this conversation" not in system
        assert system.count("ferry is booked for 3 March") == 1


async def test_reconnect_within_a_session_does_not_inject_twice(gw: Gateway, fake_anthropic: FakeAnthropic) -> None:
    ada_working_memory(gw, "Ada was choosing a tent.", written_ago=timedelta(hours=1))
    for text in ("hello", "I am back after a reconnect", "and again"):
        await gw.handle_inbound(msg(text))
    for body in turn_requests(fake_anthropic):
        everything = system_of(body) + "".join(str(m["content"]) for m in body["messages"])
        assert everything.count("Ada was choosing a tent.") == 1


async def test_expired_or_malformed_working_memory_is_skipped_without_error(
    gw: Gateway, fake_anthropic: FakeAnthropic
) -> None:
    store = ada_working_memory(gw, "Ada was painting the fence.", written_ago=timedelta(days=20))
    reply = await gw.handle_inbound(msg("hello"))
    assert reply is not None and not reply.notice
    assert "painting the fence" not in last_turn_system(fake_anthropic)
    store.write("WORKING.md", "no header at all: mowing the lawn", source="test")
    await gw.handle_inbound(msg("/new"))
    reply = await gw.handle_inbound(msg("hello again"))
    assert reply is not None and not reply.notice
    assert "mowing" not in last_turn_system(fake_anthropic)


async def test_fact_from_early_in_a_long_session_is_reachable_after_compaction(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    """No scripted summary: the fake's default answer echoes the prompt, like a faithful summariser."""
    cfg = config(tmp_path, anthropic_llm, history_turns=6)
    async with Gateway(cfg, entry_points=False) as gw:
        await gw.handle_inbound(msg("Important: my passport number ends in 4471."))
        for i in range(14):
            await gw.handle_inbound(msg(f"Filler message {i} about train timetables and seat maps."))
            await gw.settle()
        await gw.handle_inbound(msg("What does my passport number end in?"))
        body = turn_requests(fake_anthropic)[-1]
        assert all("4471" not in str(m["content"]) for m in body["messages"])  # out of the live window
        assert "4471" in system_of(body)  # but reachable: summary or recall
