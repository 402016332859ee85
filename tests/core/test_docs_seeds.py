"""docs/seeds.md: every module and test a row names exists, and every row's status is one of three."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "docs" / "seeds.md"
STATUSES = {"done", "differs", "not yet"}
_PATH = re.compile(r"`([\w./-]+\.py)(?:::(\w+))?`")


def rows() -> list[list[str]]:
    out = []
    for line in SEEDS.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|") or line.startswith(("| seed ", "|---")):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 6, f"a row of docs/seeds.md needs 6 cells: {line}"
        out.append(cells)
    return out


def missing(cell: str) -> list[str]:
    """The paths (and ``path::function``) named in ``cell`` that do not exist."""
    gone = []
    for path, function in _PATH.findall(cell):
        file = ROOT / path
        if not file.is_file():
            gone.append(path)
        elif function and not re.search(rf"^(?:async )?def {function}\(", file.read_text(encoding="utf-8"), re.M):
            gone.append(f"{path}::{function}")
    return gone


def test_every_named_module_and_test_exists() -> None:
    table = rows()
    assert len(table) >= 30
    gone = [f"{row[1]}: {name}" for row in table for cell in row[3:] for name in missing(cell)]
    assert not gone, "docs/seeds.md names what does not exist:\n" + "\n".join(gone)


def test_statuses_and_what_each_needs() -> None:
    for seed, behaviour, status, module, test, note in rows():
        assert re.match(r"^00[0134]( #34)?$", seed), f"unknown seed {seed!r} ({behaviour})"
        assert status in STATUSES, f"{behaviour}: status {status!r} is not one of {sorted(STATUSES)}"
        if status == "done":
            assert _PATH.search(module) and _PATH.search(test), f"{behaviour}: a done row names its module and test"
        else:
            assert note, f"{behaviour}: a {status} row says why in its note"


def test_the_check_catches_a_missing_test() -> None:
    assert missing("`tests/core/test_docs_seeds.py::test_every_named_module_and_test_exists`") == []
    assert missing("`tests/core/test_docs_seeds.py::no_such_test`") == ["tests/core/test_docs_seeds.py::no_such_test"]
    assert missing("`gateway/no_such_module.py`") == ["gateway/no_such_module.py"]
