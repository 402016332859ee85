"""The repository's Python sources, read and parsed once per test process.

The static checks (tests/core/test_import_rules.py, test_import_cycles.py, test_storage_seam.py) each
walk every module of the tree; parsed again by each test, the parsing alone was about a tenth of the
CPU of the tests/core + tests/api + tests/channels part of the suite (py-spy, docs/development.md).
The trees are shared, so a check must only read them (``ast.walk``, ``isinstance``), never change
one. Those modules also share one xdist group (``SOURCE_GROUP``), so one worker parses the tree once.
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


@functools.lru_cache(maxsize=4096)
def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, shared by every check that parses the same text."""
    tree = ast.parse(text, filename=filename)
    # Kept for the whole process, the trees' millions of nodes would be traversed by every full
    # collection of the cyclic GC (which made these tests twice as slow as parsing again): they are
    # moved out of its reach, as everything allocated so far.
    gc.freeze()
    return tree


def parsed(path: Path, filename: str | None = None) -> ast.Module:
    return parse(source(path), filename or str(path))
