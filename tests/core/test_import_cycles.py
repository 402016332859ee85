"""The largest import cycle among ``gateway``, ``plugins`` and ``adapters`` (issue 29, item 4).

Every import statement counts: module level, inside functions, and under ``TYPE_CHECKING`` (a type
named from a module is a dependency on it as much as a call is). ``from pkg import name`` counts as an
import of ``pkg.name`` when that is a module, else of ``pkg``; an import names only the module it
names (its parent packages are not added). The strongly connected components of that graph
(Tarjan) are the cycles; the largest may hold at most ``MAX_CYCLE`` modules.

Before issue 29 the host's modules typed their ``gateway`` argument against ``gateway.app.Gateway``,
which imports nearly everything, so 79 modules formed one cycle. They type against
``gateway.services.Services`` now, a Protocol that names only what sits below it
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.source_tree import SOURCE_GROUP, parsed

pytestmark = pytest.mark.xdist_group(SOURCE_GROUP)  # one worker parses the tree once (tests/source_tree.py)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "plugins", "adapters")
MAX_CYCLE = 5


def _module_files(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package)."""
    found = {}
    for top in PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _imported(node: ast.AST, package: str) -> Iterator[tuple[str, str | None]]:
    """(module, name imported from it or None) for each name one import statement binds."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, None
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        for alias in node.names:
            yield module, alias.name


@functools.cache  # parsed once for the tests of this module
def _scan(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    files = _module_files(root)
    graph: dict[str, set[str]] = {}
    unresolved: list[str] = []
    for name, (path, package) in files.items():
        tree = parsed(path)
        here = name if package else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(tree):
            for module, member in _imported(node, here):
                if module.partition(".")[0] not in PACKAGES:
                    continue
                if module not in files:
                    unresolved.append(f"{name}:{getattr(node, 'lineno', '?')} imports {module}, which does not exist")
                    continue
                target = f"{module}.{member}" if member and f"{module}.{member}" in files else module
                if target != name:
                    targets.add(target)
        graph[name] = targets
    return graph, unresolved


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the three packages -> the modules of the three packages it imports."""
    return _scan(root)[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, largest first (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(sorted(graph[start])))]
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def test_cycles_finds_a_cycle_through_every_form_of_import(tmp_path: Path) -> None:
    for top in PACKAGES:
        (tmp_path / top).mkdir()
        (tmp_path / top / "__init__.py").write_text("")
    (tmp_path / "gateway" / "a.py").write_text("from typing import TYPE_CHECKING\n"
                                               "if TYPE_CHECKING:\n    from gateway.b import B\n")
    (tmp_path / "gateway" / "b.py").write_text("def f():\n    from . import c\n")
    (tmp_path / "gateway" / "c.py").write_text("import plugins.d\n")
    (tmp_path / "plugins" / "d.py").write_text("from gateway import a\n")
    (tmp_path / "adapters" / "e.py").write_text("from gateway.a import x\n")  # into the cycle, not on it
    assert cycles(import_graph(tmp_path)) == [["gateway.a", "gateway.b", "gateway.c", "plugins.d"]]


def test_every_import_names_a_module_that_exists() -> None:
    """Imports under ``TYPE_CHECKING`` never run: after a move only this finds the stale ones."""
    unresolved = _scan(ROOT)[1]
    assert not unresolved, "\n".join(unresolved)


def test_the_largest_import_cycle_is_small() -> None:
    found = cycles(import_graph())
    largest = found[0] if found else []
    print(f"largest import cycle: {len(largest)} modules: {', '.join(largest)}")
    assert len(largest) <= MAX_CYCLE, (
        f"{len(largest)} modules import each other in a cycle (at most {MAX_CYCLE}); type against "
        f"gateway.services.Services instead of gateway.app.Gateway:\n  " + "\n  ".join(largest))


# Modules that build a Gateway (the CLI's commands, the test harness); the rest are handed one.
BUILDERS = ("gateway.cli.", "gateway.testing")


def test_only_the_builders_import_the_gateway_class() -> None:
    importers = sorted(m for m, targets in import_graph().items()
                       if "gateway.app" in targets and not m.startswith(BUILDERS))
    assert not importers, ("type the gateway as gateway.services.Services, not gateway.app.Gateway: "
                           + ", ".join(importers))
