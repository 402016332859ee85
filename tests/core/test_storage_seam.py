"""The storage seam holds: SQL lives in gateway/state/ only (issue 13, item 1).

Outside the state package no module may import ``sqlite3``, call ``execute``/``executemany``/
``executescript`` or hold SQL text (string constants that read as SQL, found with ``ast``; docstrings
are prose and not checked). The interface hands out no driver type, no ``await`` happens inside a
transaction, and a running gateway keeps one connection to its state database.

Tests: a test that needs a value kith can give asks the state's methods. SQL in tests is allowed in
two places only: as the literal argument of the storage inspector (``tests/storage.py``:
``select_rows``, ``select_one``, ``count_rows``, ``write_rows``), where a test checks what was stored
or puts a row in a state no method would; and in the tests below, which check the storage itself.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

import gateway.state.interface as interface
import gateway.state.records as records
from gateway.app import Gateway
from tests.conftest import make_config

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("gateway", "plugins", "adapters", "bench")
STATE_PACKAGE = "gateway/state/"

# Tests that check the storage itself, and why they need SQL or sqlite3 to do it.
STORAGE_TESTS = {
    "tests/storage.py": "the storage inspector itself",
    "tests/pg.py": "creates, empties and drops the tests' PostgreSQL database",
    "tests/state/test_pg_migrations.py": "a failing migration step (its SQL) changes nothing",
    "tests/core/test_storage_seam.py": "this file (samples for the detector)",
    "tests/core/test_state_migrations.py": "restores a database made before migrations and reads it raw",
    "tests/core/test_state_open.py": "locks a fresh database from another connection",
    "tests/core/test_state_tx.py": "makes SQLite roll back by itself inside a transaction",
    "tests/core/test_dedupe_prune.py": "reads the dedupe keys left after pruning",
    "tests/core/test_otr.py": "compares every row of every table before and after an OTR session",
    "tests/knowledge/test_kg_replay.py": "a crash mid-transaction, other connections on the same file",
    "tests/knowledge/test_kg_semantics.py": "the stored timestamp format",
    "tests/knowledge/test_retention.py": "cutoffs against SQLite's own datetime('now') format",
    "tests/durability/logs.py": "reads a killed daemon's database from outside the process",
    "tests/durability/test_daemon_durability.py": "reads a killed daemon's database from outside the process",
    "tests/durability/test_session_log_durability.py": "reads a killed daemon's database from outside",
    "tests/bus/chaos_worker.py": "its own effects database (not kith's)",
    "tests/bus/test_chaos.py": "its own effects database (not kith's)",
    "tests/bus/test_worker.py": "its own effects database (not kith's)",
    "tests/bus/test_scheduler_scaling.py": "counts the SQLite VM steps a scheduler tick costs",
    "tests/security/test_disk_full.py": "a page limit on the gateway's connection (a full disk)",
    "tests/users/test_erase_schema.py": "fills every table of the schema with a person's rows and reads the file",
}
INSPECTOR = {"select_rows", "select_one", "count_rows", "write_rows"}
EXECUTE = {"execute", "executemany", "executescript"}

# Upper-case keywords with SQL's shape around them: prompts and prose ("Update the note") do not match.
SQL = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+(?:OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\b(?:CREATE|DROP|ALTER)\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|VIEW|TRIGGER)\b|\bPRAGMA\s+\w+"
    r"|\bBEGIN\s+(?:IMMEDIATE|EXCLUSIVE|DEFERRED|TRANSACTION)\b|^\s*(?:COMMIT|ROLLBACK)\s*$"
    r"|^\s*(?:SELECT|WITH\s+RECURSIVE)\s"
)


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _text(node: ast.AST) -> str | None:
    """A string constant, or an f-string with each placeholder read as ``x``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "x"
                       for v in node.values)  # fmt: skip
    return None


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def violations(source: str, *, inspector_ok: bool = False) -> list[str]:
    """What in ``source`` breaks the seam, one line each (``line: what``)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found: list[str] = []
    allowed: set[int] = set()  # SQL handed to the storage inspector, and the parts of f-strings
    awaited: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            allowed.update(id(v) for v in node.values)
        if isinstance(node, ast.Await):
            awaited.add(id(node.value))
        if inspector_ok and isinstance(node, ast.Call) and _callee(node) in INSPECTOR:
            allowed.update(id(a) for a in node.args)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sqlite3" for a in node.names):
            found.append(f"{line}: imports sqlite3")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            found.append(f"{line}: imports from sqlite3")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTE:
            receiver = node.func.value
            # A Redis pipeline's execute is awaited (gateway/bus); no SQL driver's is here.
            redis = id(node) in awaited and isinstance(receiver, ast.Name) and receiver.id == "pipe"
            if not redis:
                found.append(f"{line}: calls {node.func.attr}()")
        elif isinstance(node, ast.Attribute) and node.attr == "db" and (
            isinstance(node.value, ast.Attribute) and node.value.attr == "state"
        ):
            found.append(f"{line}: reaches the state's connection (.state.db)")
        elif (id(node) not in docs and id(node) not in allowed and (text := _text(node)) is not None
              and SQL.search(text)):
            found.append(f"{line}: SQL text {text.strip()[:60]!r}")
    return found


def _files(*tops: str) -> Iterator[tuple[str, Path]]:
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/.venv/" not in f"/{rel}" and "__pycache__" not in rel:
                yield rel, path


def test_no_sql_outside_the_state_package() -> None:
    bad = {rel: v for rel, path in _files(*PRODUCTION) if not rel.startswith(STATE_PACKAGE)
           if (v := violations(path.read_text(encoding="utf-8")))}  # fmt: skip
    assert bad == {}, "SQL belongs in gateway/state/ (call a named state method instead)"


def test_tests_hold_sql_only_where_they_check_storage() -> None:
    bad = {rel: v for rel, path in _files("tests") if rel not in STORAGE_TESTS
           if (v := violations(path.read_text(encoding="utf-8"), inspector_ok=True))}  # fmt: skip
    assert bad == {}, "ask the state's methods, or read stored rows through tests/storage.py"
    missing = [rel for rel in STORAGE_TESTS if not (ROOT / rel).is_file()]
    assert missing == [], "a storage test listed here is gone: drop it from STORAGE_TESTS"


def test_the_detector_finds_sql_and_leaves_prose_alone() -> None:
    """The checks above can fail: each kind of violation is found, prose and prompts are not."""
    flagged = [
        "import sqlite3",
        "from sqlite3 import Row",
        "db.execute('x')",
        "conn.executescript(script)",
        "gw.state.db.in_transaction",
        "q = 'SELECT a FROM t WHERE b=?'",
        "q = 'select_me'; w = \"INSERT OR IGNORE INTO users(a) VALUES (?)\"",
        "q = f'UPDATE {table} SET user_id=?'",
        "q = 'DELETE FROM dedupe'",
        "q = 'CREATE UNIQUE INDEX i ON t(a)'",
        "q = 'PRAGMA journal_mode=WAL'",
        "q = 'BEGIN IMMEDIATE'",
        "async def f(pipe):\n    pipe.execute()",  # not awaited: not a Redis pipeline
    ]
    for sample in flagged:
        assert violations(sample), sample
    clean = [
        '"""SELECT a FROM t: a docstring is prose."""',
        "PROMPT = 'Update the note. Select what matters from the day. Delete nothing.'",
        "LABELS = 'SUMMARY:\\nPEOPLE:\\nTOPICS:'",
        "async def f(pipe):\n    await pipe.execute()",
        "select_rows(gw.state, 'SELECT COUNT(*) FROM turns')",
    ]
    for sample in clean:
        assert violations(sample, inspector_ok=True) == [], sample
    assert violations("select_rows(gw.state, 'SELECT COUNT(*) FROM turns')"), "only tests may use the inspector"


def _types(hint: object) -> Iterator[object]:
    yield hint
    for arg in typing.get_args(hint):
        yield from _types(arg)


def test_the_interface_hands_out_no_driver_type() -> None:
    protocols = [obj for obj in vars(interface).values()
                 if isinstance(obj, type) and obj.__module__ == interface.__name__ and issubclass(obj, typing.Protocol)]  # type: ignore[arg-type]  # fmt: skip
    assert len(protocols) >= 12
    seen = 0
    for proto in protocols:
        for name, member in vars(proto).items():
            if name.startswith("_"):
                continue
            target = member.fget if isinstance(member, property) else member
            if not callable(target):
                continue
            for hint in typing.get_type_hints(target, vars(interface)).values():
                for t in _types(hint):
                    seen += 1
                    assert getattr(t, "__module__", "") != "sqlite3", f"{proto.__name__}.{name} exposes {t}"
    for record in vars(records).values():
        if dataclasses.is_dataclass(record) and isinstance(record, type):
            assert record.__dataclass_params__.frozen, record  # type: ignore[attr-defined]
            for hint in typing.get_type_hints(record).values():
                for t in _types(hint):
                    assert getattr(t, "__module__", "") != "sqlite3", f"{record.__name__} holds {t}"
    assert seen > 100
    for module in (interface, records):
        assert "sqlite" not in Path(module.__file__ or "").read_text(encoding="utf-8").split('"""', 2)[2].lower()


def _awaits_in_tx(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.With | ast.AsyncWith) and any(
            isinstance(item.context_expr, ast.Call) and _callee(item.context_expr) == "tx" for item in node.items
        ):
            lines += [n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Await)]
    return lines


def test_no_await_inside_a_transaction() -> None:
    """One connection serves every task on the loop: a transaction that awaited would take in the
    statements of whatever task ran meanwhile."""
    bad = {rel: lines for rel, path in _files(*PRODUCTION, "tests")
           if (lines := _awaits_in_tx(path.read_text(encoding="utf-8")))}  # fmt: skip
    assert bad == {}
    assert _awaits_in_tx("async def f(state):\n    with state.tx():\n        await g()\n") == [3]


def _connections_to(path: Path) -> int:
    target = str(path.resolve())
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            continue
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_a_running_gateway_has_one_connection_to_its_state_database(tmp_path: Path) -> None:
    """The state, the knowledge graph, the access policy and the link requests share one connection
    (before issue 13 the state, the graph and the access store each opened their own)."""
    cfg = make_config(tmp_path)
    async with Gateway(cfg, entry_points=False, serve_http=False, supervise=False) as gw:
        assert gw.kg is not None
        gw.kg.add("u1", "Sam", "likes", "tea")  # the graph and the access policy have been used
        from plugins.access import policy_for

        assert not policy_for(gw).store.is_approved("telegram", "nobody")
        assert _connections_to(Path(cfg.data_dir) / "state.sqlite") == 1
