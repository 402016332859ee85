"""``kith bench turn --against DIR``: the same bench code run against a baseline tree's gateway and this
tree's, alternately, each in its own interpreter (docs/benchmarks.md records its figures)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.turn import run_against

ROOT = Path(__file__).resolve().parents[2]


def _baseline(tmp_path: Path) -> Path:
    """This checkout's gateway as a separate source tree, without its bench: the shim's copy must be
    the bench that runs (a tree's own bench, if any, is never imported)."""
    tree = tmp_path / "base"
    tree.mkdir()
    listed = subprocess.run(["git", "ls-files", "gateway", "plugins", "adapters"], cwd=ROOT, capture_output=True,
                            text=True, check=False)  # fmt: skip
    if listed.returncode != 0 or not listed.stdout:
        pytest.skip("not a git checkout")
    for rel in listed.stdout.splitlines():
        src, dst = ROOT / rel, tree / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    return tree


def test_against_alternates_trees_and_reports_ratios(tmp_path: Path) -> None:
    result = run_against(str(_baseline(tmp_path)), clients=2, turns=2, core=True, rounds=1)
    assert result["bench"] == "turn-against" and result["rounds"] == 1
    for name in ("before", "after"):
        [run] = result["runs"][name]
        assert run["turns_per_s"] > 0 and run["overhead_p50_ms"] > 0
    assert result["ratio_after_to_before"]["turns_per_s"] > 0


def test_against_a_tree_that_is_not_kith_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not a kith source tree"):
        run_against(str(tmp_path), clients=1, turns=1, core=True, rounds=1)
