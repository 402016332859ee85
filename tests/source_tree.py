"""The repository's Python sources, read and parsed once per test process.

The static checks (tests/core/test_import_rules.py, test_import_cycles.py, test_storage_seam.py) each
walk every module of the tree; parsed again by each test, the parsing alone was about a tenth of the
CPU of the tests/core + tests/api + tests/channels part of the suite (py-spy, docs/development.md).
The trees are shared, so a check must only read them (``ast.walk``, ``isinstance``), never change
one. Under ``scripts/test`` the tree is parsed once, before the parallel part's workers are forked from
the process that collected the suite (``warm``, called from tests/conftest.py), and every worker shares
those trees; under ``pytest -n N`` (pytest-xdist) the modules share one xdist group (``SOURCE_GROUP``),
so one worker parses the tree once.
"""

from __future__ import annotations

import ast
import functools
import gc
from pathlib import Path

SOURCE_GROUP = "source_tree"


@functools.cache
def source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, shared by every check that parses the same text (whatever file name it gives:
    a tree does not hold it, only a syntax error's message does)."""
    try:
        return _parse(text)
    except SyntaxError:
        return ast.parse(text, filename=filename)  # raises again, naming the file


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> ast.Module:
    tree = ast.parse(text)
    # Kept for the whole process, the trees' millions of nodes would be traversed by every full
    # collection of the cyclic GC (which made these tests twice as slow as parsing again): they are
    # moved out of its reach, as everything allocated so far.
    gc.freeze()
    return tree


def parsed(path: Path, filename: str | None = None) -> ast.Module:
    return parse(source(path), filename or str(path))


#: Where the static checks look (tests/core): every Python file of these folders of the repository.
TOPS = ("gateway", "adapters", "plugins", "bench", "tests", "examples", "scripts")


def warm(root: Path) -> int:
    """Read and parse every Python file under ``root``'s ``TOPS`` (about 1.5 s of CPU for 900 files);
    returns how many. Done in the process the parallel workers are forked from, it is done once."""
    count = 0
    for top in TOPS:
        for path in (root / top).rglob("*.py"):
            if "node_modules" in path.parts:
                continue
            try:
                parse(source(path))
            except (SyntaxError, UnicodeDecodeError, OSError):
                continue  # a check that reads this file reports it itself
            count += 1
    return count
