"""``kith state migrate``: a SQLite install copied into PostgreSQL with identical row counts and
content (checksums per table, and every row compared here independently), a used target refused
without --force, a mismatch reported with a non-zero exit."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gateway.cli.main import main as kith
from gateway.cli.state import compare
from gateway.state import State, TranscriptEntry, open_state, open_state_url
from gateway.state.transfer import dump_tables
from tests.state.test_transfer import T0, fill


def _data_dir(tmp_path: Path, turns: int) -> Path:
    data = tmp_path / "data"
    state = open_state(data / "state.sqlite")
    fill(state, people=5, turns=4)
    batch = [TranscriptEntry(turn_id=f"bulk{i}", session_id=f"s{i % 5}", user_id=f"u{i % 5}",
                             role="user" if i % 2 else "assistant", content=f"bulk message {i} ✓ 50% 'q'",
                             channel="telegram", conversation_key=f"tg:{i % 5}", speaker="",
                             created_at=T0 + timedelta(seconds=i)) for i in range(turns)]  # fmt: skip
    for start in range(0, turns, 1000):
        with state.tx():
            state.turns.append(*batch[start:start + 1000])
    state.close()
    return data


def _all_rows(state: State) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for table, rows in dump_tables(state):
        out.setdefault(table, []).extend(rows)
    return out


def _round_trip(tmp_path: Path, url: str, turns: int, capsys: pytest.CaptureFixture[str]) -> None:
    data = _data_dir(tmp_path, turns)
    assert kith(["state", "migrate", "--to", url, "--from", str(data)]) == 0
    out = capsys.readouterr().out
    assert "every table matches" in out and "MISMATCH" not in out
    assert f"{'turns':<24}  {turns + 20:>11}  {turns + 20:>11}  ok" in out
    source, target = open_state(data / "state.sqlite"), open_state_url(url)
    try:
        want, got = _all_rows(source), _all_rows(target)
        assert {t: len(r) for t, r in got.items()} == {t: len(r) for t, r in want.items()}
        assert got == want  # every row, every value, same types
        assert target.turns.last_seq() == source.turns.last_seq()
    finally:
        source.close()
        target.close()


def test_a_small_install_moves_to_postgresql(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _round_trip(tmp_path, pg_url, 300, capsys)
    # a used target is refused, and --force empties it first
    assert kith(["state", "migrate", "--to", pg_url, "--from", str(tmp_path / "data")]) == 2
    assert "already holds rows" in capsys.readouterr().err
    assert kith(["state", "migrate", "--to", pg_url, "--from", str(tmp_path / "data" / "state.sqlite"),
                 "--force"]) == 0  # fmt: skip


def test_ten_thousand_turns_move_without_loss(tmp_path: Path, pg_url: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The issue's acceptance run (about 3 s here, so in the default suite)."""
    _round_trip(tmp_path, pg_url, 10_000, capsys)


def test_the_report_names_each_mismatch() -> None:
    lines, ok = compare({"a": (1, "x"), "b": (2, "y"), "c": (1, "z")}, {"a": (1, "x"), "b": (2, "Y"), "d": (0, "")})
    assert not ok
    text = "\n".join(lines)
    assert "MISMATCH (content)" in text and "MISSING in target" in text and "MISSING in source" in text
    assert compare({"a": (1, "x")}, {"a": (1, "x")})[1]


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kith(["state", "migrate", "--to", "sqlite:///x", "--from", str(tmp_path)]) == 2
    assert kith(["state", "migrate", "--to", "postgresql://nobody@127.0.0.1:1/x", "--from", str(tmp_path)]) == 2
    assert "no SQLite state" in capsys.readouterr().err
