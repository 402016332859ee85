"""Issue 28: a file a model rewrites whole (a distillation tier, compaction's WORKING.md) keeps what it
replaced, and ``kith memory rollback --file`` gives it back: here a long-term memory that a careless
monthly digest cut in half, through the real tier run against the fake Anthropic server."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.cli.main import main as kith
from gateway.configread import parse_config
from gateway.llm.anthropic import AnthropicProvider
from gateway.memory.background.distill import run_tier
from gateway.memory.background.settings import DistillConfig
from gateway.memory.files.scopes import root_for, user_scope
from gateway.memory.files.store import MemoryStore
from tests.fakes.anthropic import API_KEY, FakeAnthropic

LONG = "# Long-term memory\n\n## History\n" + "".join(f"- Year {2010 + i}: something Ada will want kept.\n"
                                                       for i in range(10))  # fmt: skip


async def test_a_tier_rewrite_that_drops_half_is_undone_by_the_cli(
    tmp_path: Path, fake_anthropic: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    store = MemoryStore(root_for(data, user_scope("ada")))
    store.write("MEMORY_MID.md", "# Mid-term memory\n\n- Ada plans a May trip.\n", source="test")
    store.write("MEMORY_LONG.md", LONG, source="test")
    cfg = parse_config({"llm": {"api_key": API_KEY, "base_url": fake_anthropic.base_url, "max_retries": 0}}, env={})
    provider: Any = AnthropicProvider(cfg.llm)
    fake_anthropic.enqueue("## History\n- Year 2010: something Ada will want kept.\n- 2026: a May trip.",
                           kind="distillation")  # fmt: skip
    result = await run_tier("long", store=store, cfg=DistillConfig(), providers={"main": provider},
                            now=datetime.now(UTC), force=True)  # fmt: skip
    await provider.close()
    assert result.status == "written" and "Year 2015" not in store.read("MEMORY_LONG.md")

    config = tmp_path / "kith.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(data), "llm": {"provider": "echo"}}))
    assert kith(["-c", str(config), "memory", "rollback", "--user", "ada", "--file", "MEMORY_LONG.md", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "restored"
    assert store.read("MEMORY_LONG.md") == LONG
