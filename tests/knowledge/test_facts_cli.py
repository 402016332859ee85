"""``kith facts ...`` end to end through the real argument parser and a config file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli.main import main


@pytest.fixture
def cfg(tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n")
    return str(path)


def run(cfg: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["-c", cfg, "facts", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_facts_lifecycle(cfg: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(cfg, capsys, "list") == (0, "no facts\n", "")
    assert not (tmp_path / "data" / "state.sqlite").exists()  # listing created nothing

    code, out, _ = run(
        cfg, capsys, "add", "--user", "alice", "alice", "lives_in", "Berlin", "--valid-from", "2024-01-01"
    )
    assert code == 0 and out.startswith("inserted #1")
    code, out, _ = run(
        cfg, capsys, "add", "--user", "alice", "alice", "lives in", "Munich", "--valid-from", "2024-06-01"
    )
    assert out.strip() == "inserted #2; superseded [1]"

    code, out, _ = run(cfg, capsys, "list", "--user", "alice", "--json")
    assert [f["object"] for f in json.loads(out)] == ["Munich"]
    code, out, _ = run(cfg, capsys, "list", "--user", "alice", "--as-of", "2024-03-01", "--json")
    assert [f["object"] for f in json.loads(out)] == ["Berlin"]
    code, out, _ = run(cfg, capsys, "timeline", "alice")
    assert "Berlin" in out and "Munich" in out and out.index("Berlin") < out.index("Munich")

    assert run(cfg, capsys, "invalidate", "2")[0] == 0
    assert run(cfg, capsys, "list", "--user", "alice")[1] == "no facts\n"
    assert len(json.loads(run(cfg, capsys, "list", "--all", "--json")[1])) == 2
    assert run(cfg, capsys, "invalidate", "2")[0] == 1
    assert run(cfg, capsys, "delete", "1")[:2] == (0, "deleted #1\n")
    assert run(cfg, capsys, "delete", "1")[0] == 1


def test_bad_input_is_an_error_not_a_traceback(cfg: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(cfg, capsys, "add", "--user", "alice", "alice", "likes", "tea", "--valid-from", "someday")
    assert code == 2 and "not a timestamp" in err
    assert run(cfg, capsys, "add", "--user", "alice", "alice", "likes", "tea")[0] == 0
    code, _, err = run(cfg, capsys, "list", "--as-of", "the day after")
    assert code == 2 and "not a timestamp" in err


def test_facts_list_entity_keeps_the_facts_about_it(cfg: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 004: ``facts --entity`` filters on the entity, as subject or as object."""
    run(cfg, capsys, "add", "--user", "alice", "alice", "works_at", "Acme")
    run(cfg, capsys, "add", "--user", "alice", "Hanna", "sister_of", "alice")
    run(cfg, capsys, "add", "--user", "alice", "Hanna", "lives_in", "Munich")
    code, out, _ = run(cfg, capsys, "list", "--entity", "hanna", "--json")
    assert code == 0 and sorted(f["predicate"] for f in json.loads(out)) == ["lives_in", "sister_of"]
    code, out, _ = run(cfg, capsys, "list", "--entity", "Alice", "--json")
    assert sorted(f["predicate"] for f in json.loads(out)) == ["sister_of", "works_at"]
