"""``kith usage``: rows per person, role and day from the state database, as a table or JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.state import open_configured


def _seed(tmp_path: Path, state_url: str | None) -> Path:
    """The rows, on SQLite or PostgreSQL (tests/pg.py), and a config naming where they are."""
    data = tmp_path / "data"
    data.mkdir()
    state = open_configured(data, state_url)
    state.users.create("ualice", display_name="Alice", timezone="UTC")
    state.users.create("ubob", display_name="Bob", timezone="UTC")
    today = datetime.now(UTC).date()
    for day, user, role, tokens in [(today, "ualice", "main", 1000), (today, "ualice", "main", 500),
                                    (today, "ualice", "cheap", 4000), (today, "ubob", "main", 10),
                                    (today - timedelta(days=10), "ualice", "main", 99)]:
        state.usage.add(user_id=user, day=day.isoformat(), role=role, provider="openai", model=f"m-{role}",
                        input_tokens=tokens, output_tokens=tokens // 10, cache_read_tokens=0, cache_write_tokens=0,
                        cost_usd=tokens / 1e6)
    state.close()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"data_dir: {data}\nllm: {{daily_budget_usd: 0.5}}\n"
                   + (f"state: {{url: '{state_url}'}}\n" if state_url else ""))
    return cfg


def test_usage_json_per_person_role_and_day(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            state_url: str | None) -> None:  # fmt: skip
    cfg = _seed(tmp_path, state_url)
    assert main(["-c", str(cfg), "usage", "--user", "Alice", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["role"], r["calls"], r["input_tokens"]) for r in rows} == {("main", 2, 1500), ("cheap", 1, 4000)}
    assert all(r["user_id"] == "ualice" for r in rows)
    assert main(["-c", str(cfg), "usage", "--days", "30", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4  # the old day and Bob too


def test_usage_table_and_unknown_user(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      state_url: str | None) -> None:  # fmt: skip
    cfg = _seed(tmp_path, state_url)
    assert main(["-c", str(cfg), "usage"]) == 0
    out = capsys.readouterr().out
    assert "ualice" in out and "ubob" in out and "m-cheap" in out and "daily budget per person: $0.50" in out
    assert main(["-c", str(cfg), "usage", "--user", "carol"]) == 2
    assert "no user 'carol'" in capsys.readouterr().err
