"""Commands with a config use the state it names: with ``state.url`` set, ``kith facts`` and
``kith users`` read and write PostgreSQL, and no SQLite file appears in the data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli.main import main as kith
from gateway.state import open_state_url


def test_commands_follow_state_url(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"data_dir: {data}\nstate: {{url: '{pg_url}'}}\n")
    state = open_state_url(pg_url)
    state.users.create("ualice", display_name="Alice", timezone="UTC")
    state.close()
    assert kith(["-c", str(cfg), "facts", "add", "--user", "ualice", "Alice", "lives_in", "Leeds"]) == 0
    capsys.readouterr()
    assert kith(["-c", str(cfg), "facts", "list", "--user", "ualice", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert [(f["subject"], f["object"]) for f in facts] == [("Alice", "Leeds")]
    assert kith(["-c", str(cfg), "users", "list"]) == 0
    assert "ualice" in capsys.readouterr().out
    state = open_state_url(pg_url)
    try:
        assert [f.object for f in state.knowledge.all("ualice")] == ["Leeds"]
    finally:
        state.close()
    assert not (data / "state.sqlite").exists()
