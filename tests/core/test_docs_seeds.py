"""docs/seeds.md: every module and test a row names exists, and every row's status is one of three."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "docs" / "seeds.md"
STATUSES = {"done", "differs", "not yet"}
# A file of the tree (Python, or the web console's JavaScript), optionally ``::function`` of a Python one.
_PATH = re.compile(r"`([\w./-]+\.(?:py|js))(?:::(\w+))?`")
# Anything in backticks that looks like a Python file: it must be of the one form _PATH reads, so a
# class-qualified node id or a typo cannot slip past the existence check unread.
_PY_MENTION = re.compile(r"`([^`]*\.py\b[^`]*)`")


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
        elif function and not (path.endswith(".py") and re.search(
                rf"^(?:async )?def {function}\(", file.read_text(encoding="utf-8"), re.M)):
            gone.append(f"{path}::{function}")
    return gone


def unread(cell: str) -> list[str]:
    """Mentions of a ``.py`` file in ``cell`` that are not ``path`` or ``path::function``."""
    return [m for m in _PY_MENTION.findall(cell) if not _PATH.fullmatch(f"`{m}`")]


def test_every_named_module_and_test_exists() -> None:
    table = rows()
    assert len(table) >= 214  # the behaviours counted in the four texts (issue 34)
    odd = [f"{row[1]}: {m}" for row in table for cell in row[3:] for m in unread(cell)]
    assert not odd, "docs/seeds.md names a file in a form the check cannot read:\n" + "\n".join(odd)
    gone = [f"{row[1]}: {name}" for row in table for cell in row[3:] for name in missing(cell)]
    assert not gone, "docs/seeds.md names what does not exist:\n" + "\n".join(gone)


def test_statuses_and_what_each_needs() -> None:
    for seed, behaviour, status, module, test, note in rows():
        assert re.match(r"^00[0134]( #34)?$", seed), f"unknown seed {seed!r} ({behaviour})"
        assert status in STATUSES, f"{behaviour}: status {status!r} is not one of {sorted(STATUSES)}"
        if status == "done":
            assert _PATH.search(module) and _PATH.search(test), f"{behaviour}: a done row names its module and test"
            assert all(p.startswith("tests/") and f for p, f in _PATH.findall(test)), \
                f"{behaviour}: the test cell names test functions (tests/...py::test_name)"
            assert not any(p.startswith("tests/") for p, _ in _PATH.findall(module)), \
                f"{behaviour}: the module cell names code, not tests"
        else:
            assert note, f"{behaviour}: a {status} row says why in its note"


def test_every_seed_has_its_rows_and_no_behaviour_twice() -> None:
    table = rows()
    for seed in ("000", "001", "003", "004"):
        assert sum(row[0].startswith(seed) for row in table) >= 15, f"seed {seed} has almost no rows"
    seen: set[tuple[str, str]] = set()
    for row in table:
        key = (row[0][:3], row[1].lower())
        assert key not in seen, f"a behaviour listed twice: {row[1]}"
        seen.add(key)


def test_the_check_catches_a_missing_test() -> None:
    assert missing("`tests/core/test_docs_seeds.py::test_every_named_module_and_test_exists`") == []
    assert missing("`tests/core/test_docs_seeds.py::no_such_test`") == ["tests/core/test_docs_seeds.py::no_such_test"]
    assert missing("`gateway/no_such_module.py`") == ["gateway/no_such_module.py"]
    assert missing("`gateway/web/static/console/recall.js`") == []
    assert missing("`gateway/web/static/console/no_such_view.js`") == ["gateway/web/static/console/no_such_view.js"]
    assert unread("`tests/core/test_docs_seeds.py::Class::test_x`") == ["tests/core/test_docs_seeds.py::Class::test_x"]
    assert unread("`tests/core/test_docs_seeds.py::rows`, `gateway/app.py`") == []
