"""Context tiers: the table, and which tier a turn gets (request > conversation > channel > default)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.config import ConfigError
from gateway.configread import parse_config
from gateway.turn.tiers import file_loads, items_at, loads, tier_of
from gateway.types import InboundMessage, Turn


def test_table_is_cumulative_and_matches_the_docs() -> None:
    assert items_at(1) == ["IDENTITY.md"]
    for item in ("SOUL.md", "PROTOCOLS.md", "USER.md", "PATTERNS.md", "WORKING.md", "MEMORY_SHORT.md",
                 "MEMORY_MID.md", "REMINDERS.md", "people", "facts", "recall", "memory_search"):
        assert not loads(1, item) and loads(2, item) and loads(4, item), item
    for item in ("MEMORY_LONG.md", "CONTEXT_TIERS.md"):
        assert not loads(2, item) and loads(3, item), item
    for item in ("SCRATCH.md", "TASKS.json", "scratchpad", "tasks"):
        assert not loads(3, item) and loads(4, item), item
    assert set(items_at(3)) < set(items_at(4))


def test_file_loads_gates_only_table_files() -> None:
    assert not file_loads(2, "SCRATCH.md") and file_loads(4, "SCRATCH.md")
    assert file_loads(1, "sessions/2026-05-09.md") and file_loads(1, "people/telegram-1.md")
    assert not file_loads(1, "USER.md") and file_loads(2, "USER.md")


def test_unknown_item_is_loud() -> None:
    with pytest.raises(KeyError, match="unknown tier item"):
        loads(2, "USER.MD")


def _turn(channel: str = "telegram", conversation: str = "-100", raw: dict[str, object] | None = None,
          tier: int | None = None) -> Turn:
    msg = InboundMessage(channel=channel, account_id="1", conversation_id=conversation, text="hi", raw=raw or {})
    return Turn(turn_id="t", message=msg, received_at=datetime.now(UTC), tier=tier)


def test_tier_precedence(tmp_path: Path) -> None:
    cfg = parse_config({"data_dir": str(tmp_path), "context": {
        "default_tier": 2, "channel_tier": {"telegram": 1}, "conversation_tier": {"telegram:-200": 3}}}, env={})
    gw = Gateway(cfg, serve_http=False, supervise=False, entry_points=False)
    assert tier_of(gw, _turn(channel="discord")) == 2
    assert tier_of(gw, _turn()) == 1
    assert tier_of(gw, _turn(conversation="-200")) == 3
    assert tier_of(gw, _turn(conversation="-200", raw={"tier": "4"})) == 4
    assert tier_of(gw, _turn(raw={"tier": 9})) == 4  # clamped, never an error for a client's value
    assert tier_of(gw, _turn(raw={"tier": "deep"})) == 1  # ignored
    assert tier_of(gw, _turn(raw={"tier": 3}, tier=2)) == 2  # Turn.tier set by the host wins


def test_config_rejects_out_of_range_tiers() -> None:
    with pytest.raises(ConfigError, match="channel_tier"):
        parse_config({"context": {"channel_tier": {"telegram": 5}}}, env={})
