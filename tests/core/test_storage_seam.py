"""The storage seam holds: SQL lives in gateway/state/ only (issue 13, item 1), and inside it the stores
are named by concept and written once for both drivers (issue 29, item 5).

Outside the state package no module may import ``sqlite3``, call ``execute``/``executemany``/
``executescript`` or hold SQL text (string constants that read as SQL, found with ``ast``; docstrings
are prose and not checked). The interface hands out no driver type, no ``await`` happens inside a
transaction, and a running gateway keeps one connection to its state database. Inside the package:
the portable stores (``gateway/state/stores/``) import no driver and write only the SQL both drivers
speak, each driver implements the ``Database`` Protocol, a driver folder holds only its driver, dialect,
migrations and overrides, and the PostgreSQL backend names nothing of SQLite's. The two schemas are
compared in tests/state/test_schema_parity.py.

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
from gateway.state import open_state
from gateway.state.database import Database
from gateway.state.postgres import PostgresState
from gateway.state.postgres.database import PgDatabase
from gateway.state.sqlite.database import SqliteDatabase
from gateway.state.stores import Stores
from tests.conftest import make_config
from tests.source_tree import SOURCE_GROUP, parse
from tests.source_tree import source as read_source

pytestmark = pytest.mark.xdist_group(SOURCE_GROUP)  # one worker parses the tree once (tests/source_tree.py)

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("gateway", "plugins", "adapters", "bench")
STATE_PACKAGE = "gateway/state/"

# Tests that check the storage itself, and why they need SQL or sqlite3 to do it.
STORAGE_TESTS = {
    "tests/storage.py": "the storage inspector itself",
    "tests/pg.py": "creates, empties and drops the tests' PostgreSQL database",
    "tests/state/test_pg_migrations.py": "a failing migration step (its SQL) changes nothing",
    "tests/state/test_schema_parity.py": "reads both backends' schema catalogues",
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
    tree = parse(source)
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
            # A Redis pipeline's execute is awaited (gateway/bus), so is an IMAP command on aioimaplib's
            # protocol (tests/fakes/imap_server.py: STARTTLS); no SQL driver's is here.
            other = id(node) in awaited and isinstance(receiver, ast.Name) and receiver.id in ("pipe", "protocol")
            if not other:
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
           if (v := violations(read_source(path)))}  # fmt: skip
    assert bad == {}, "SQL belongs in gateway/state/ (call a named state method instead)"


def test_tests_hold_sql_only_where_they_check_storage() -> None:
    bad = {rel: v for rel, path in _files("tests") if rel not in STORAGE_TESTS
           if (v := violations(read_source(path), inspector_ok=True))}  # fmt: skip
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
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.With | ast.AsyncWith) and any(
            isinstance(item.context_expr, ast.Call) and _callee(item.context_expr) == "tx" for item in node.items
        ):
            lines += [n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Await)]
    return lines


def test_no_await_inside_a_transaction() -> None:
    """One connection serves every task on the loop: a transaction that awaited would take in the
    statements of whatever task ran meanwhile."""
    bad = {rel: lines for rel, path in _files(*PRODUCTION, "tests")
           if (lines := _awaits_in_tx(read_source(path)))}  # fmt: skip
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


# ------------------------------------------------------------------------------ inside the package

STORES = "gateway/state/stores/"
DRIVERS = {"sqlite": "gateway/state/sqlite/", "postgres": "gateway/state/postgres/"}
# What a driver folder may hold (docs/architecture.md, "Storage"): its driver, its dialect, its
# migrations, whole tables for transfer, and its own forms of what has no common SQL. A new store goes
# to gateway/state/stores/.
DRIVER_MODULES = {
    "sqlite": {"__init__", "database", "migrations", "tables", "transcript", "people"},
    "postgres": {"__init__", "database", "dialect", "migrations", "tables", "transcript", "people", "fulltext",
                 "scratch"},
}  # fmt: skip
# SQL one server speaks and the other does not: never in a portable store.
DIALECT_ONLY = re.compile(
    r"\bINSERT\s+OR\s+\w+|\browid\b|\bctid\b|%s|%\(\w+\)s|\bPRAGMA\b|\bsqlite_\w+|\binformation_schema\b"
    r"|\bpg_\w+|\bGREATEST\b|\bLEAST\b|\b(?:max|min)\([^(),]+,[^(),]+\)|\bMATCH\b|\bILIKE\b|::\w+",
    re.IGNORECASE,
)


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if id(node) not in docs and (text := _text(node)) is not None:
            yield getattr(node, "lineno", 0), text


def dialect_violations(source: str) -> list[str]:
    """What in a portable store's ``source`` is one driver's: a driver import, or one server's SQL."""
    tree = parse(source)
    found = [f"imports {m}" for m in sorted(_imports(tree))
             if m.split(".")[0] in ("sqlite3", "psycopg", "psycopg_pool")
             or m.startswith(("gateway.state.sqlite", "gateway.state.postgres"))]  # fmt: skip
    found += [f"{line}: {m[0]!r} in {text.strip()[:60]!r}" for line, text in _strings(tree)
              if (m := DIALECT_ONLY.search(text))]  # fmt: skip
    return found


def test_portable_stores_import_no_driver_and_write_only_common_sql() -> None:
    stores = list(_files(STORES))
    assert len(stores) >= 12
    bad = {rel: v for rel, path in stores if (v := dialect_violations(read_source(path)))}
    assert bad == {}, "a store's SQL runs on both drivers (gateway/state/database.py); the rest is a driver's override"
    for sample in ("import sqlite3", "from gateway.state.sqlite.database import SqliteDatabase",
                   "q = 'INSERT OR IGNORE INTO t(a) VALUES (?)'", "q = 'DELETE FROM t WHERE rowid IN (?)'",
                   "q = 'UPDATE t SET a=max(a, ?)'", "q = 'SELECT a FROM t WHERE b=%s'"):  # fmt: skip
        assert dialect_violations(sample), sample
    assert dialect_violations("q = 'SELECT max(seq) FROM turns WHERE b=? ON CONFLICT DO NOTHING'") == []


def test_the_postgresql_backend_names_nothing_of_sqlite() -> None:
    """No ``Sqlite*`` class, no import of the SQLite backend, no ``type: ignore`` standing in for a type."""
    files = list(_files(DRIVERS["postgres"]))
    assert files
    for rel, path in files:
        source = read_source(path)
        tree = parse(source)
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not [n for n in names if n.lower().startswith("sqlite")], rel
        assert not [m for m in _imports(tree) if m.startswith("gateway.state.sqlite")], rel
        assert "type: ignore" not in source, rel
    sqlite_tree = parse((ROOT / DRIVERS["sqlite"] / "__init__.py").read_text(encoding="utf-8"))
    assert not [m for m in _imports(sqlite_tree) if m.startswith("gateway.state.postgres")]


def test_driver_folders_hold_only_drivers_dialects_migrations_and_overrides() -> None:
    for driver, folder in DRIVERS.items():
        modules = {path.stem for _, path in _files(folder)}
        extra = sorted(modules - DRIVER_MODULES[driver])
        assert extra == [], f"{extra}: a store goes to {STORES}"
    # An override subclasses a portable store and changes something of it.
    import gateway.state.postgres.people as pg_people
    import gateway.state.postgres.transcript as pg_transcript
    import gateway.state.sqlite.people as sqlite_people
    import gateway.state.sqlite.transcript as sqlite_transcript

    for module in (pg_people, pg_transcript, sqlite_people, sqlite_transcript):
        classes = [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__]
        assert classes, module.__name__
        for cls in classes:
            base = cls.__mro__[1]
            assert base.__module__.startswith("gateway.state.stores."), (cls, base)
            assert {n for n in vars(cls) if not n.startswith("__")} - {"_pg", "_sqlite"}, cls


def _members(proto: type) -> set[str]:
    return {n for n in vars(proto) if not n.startswith("_")}


def test_both_drivers_implement_the_database_protocol_and_stores_take_it() -> None:
    members = _members(Database)
    assert {"run", "one", "all", "many", "tx", "atomic", "row_id"} <= members
    for driver in (SqliteDatabase, PgDatabase):
        missing = [m for m in members if not hasattr(driver, m)]
        assert missing == [], f"{driver.__name__} lacks {missing}"
    typed = 0
    for rel, path in _files(STORES):
        for node in ast.walk(parse(read_source(path))):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                db = [a for a in node.args.args if a.arg == "db"]
                assert db and isinstance(db[0].annotation, ast.Name) and db[0].annotation.id == "Database", rel
                typed += 1
    assert typed >= 20


def test_every_store_of_the_interface_is_built_on_both_backends(tmp_path: Path) -> None:
    properties = {n for n, v in vars(interface.State).items() if isinstance(v, property)}
    assert {"watermarks", "writer_progress", "sleep_runs", "distill_runs", "retention", "approval_audit"} <= properties
    assert "progress" not in properties  # one store per job (issue 29, item 5)
    assert issubclass(PostgresState, Stores)
    state = open_state(tmp_path / "state.sqlite")
    try:
        assert isinstance(state, Stores)
        assert [p for p in sorted(properties) if not hasattr(state, p)] == []
        for name in properties:  # each store has the methods its Protocol names
            proto = typing.get_type_hints(getattr(interface.State, name).fget, vars(interface))["return"]
            assert [m for m in _members(proto) if not hasattr(getattr(state, name), m)] == [], name
    finally:
        state.close()
