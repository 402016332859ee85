"""The two schemas stay equal: a SQLite file and a PostgreSQL database, each migrated by its own backend,
are read back from their catalogues and compared: tables, columns (types by SQLite's affinity rules
against PostgreSQL's types, nullability, defaults, identities), primary keys, unique constraints,
named indexes (columns, uniqueness, partial predicate) and the transcript's full text.

Nothing here is a hand-kept list of the schema: adding a table, column or index to one backend's
migrations and not the other's fails this test with the difference named.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from gateway.state import migrate, open_state, open_state_url
from gateway.state.postgres import migrations as pg_migrations
from gateway.state.sqlite import migrations as sqlite_migrations
from tests.pg import fresh_pg_database

# PostgreSQL's type for each SQLite affinity (docs/architecture.md, "Storage": SQLite's integers are
# 64-bit, its REAL a double, its TEXT compared bytewise).
PG_TYPE = {"bigint": "INTEGER", "text": "TEXT", "double precision": "REAL"}


@dataclass(frozen=True)
class Column:
    type: str  # a SQLite affinity: INTEGER, TEXT, REAL, NUMERIC, BLOB
    nullable: bool
    default: str | None
    identity: bool  # SQLite AUTOINCREMENT / a PostgreSQL identity


@dataclass(frozen=True)
class Index:
    table: str
    columns: tuple[str, ...]
    unique: bool
    where: str  # the partial index's predicate, normalised; "" for none


@dataclass
class Schema:
    columns: dict[str, dict[str, Column]] = field(default_factory=dict)  # table -> column -> Column
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # table -> primary key
    uniques: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)  # UNIQUE constraints
    indexes: dict[str, Index] = field(default_factory=dict)  # CREATE INDEX ones, by name
    fulltext: set[tuple[str, str]] = field(default_factory=set)  # (table, column) searched by words


def affinity(declared: str) -> str:
    """SQLite's rules for a declared type's affinity (https://sqlite.org/datatype3.html, 3.1)."""
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(s in t for s in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not t or "BLOB" in t:
        return "BLOB"
    if any(s in t for s in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def _default(value: Any) -> str | None:
    """A default as written, without PostgreSQL's cast (``'auto'::text`` is SQLite's ``'auto'``)."""
    return None if value is None else re.sub(r"::[a-z ]+$", "", str(value))


def _predicate(text: str) -> str:
    return re.sub(r"[\s()]", "", text).lower()


def sqlite_schema(path: Path) -> Schema:
    out = Schema()
    conn = sqlite3.connect(path)
    try:
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name").fetchall()
        virtual = {n: sql for n, sql in tables if sql.upper().startswith("CREATE VIRTUAL TABLE")}
        for name, sql in virtual.items():
            args = sql[sql.index("(") + 1: sql.rindex(")")]
            content = re.search(r"content\s*=\s*'(\w+)'", args)
            assert content, f"full-text table {name} indexes no content table: {sql}"
            for column in (a.strip() for a in args.split(",")):
                if "=" not in column:
                    out.fulltext.add((content[1], column))
        for name, sql in tables:
            if name.startswith("sqlite_") or name in virtual or any(name.startswith(v + "_") for v in virtual):
                continue
            info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
            out.keys[name] = tuple(c[1] for c in sorted((c for c in info if c[5]), key=lambda c: c[5]))
            out.columns[name] = {
                c[1]: Column(type=affinity(c[2]), nullable=not (c[3] or c[5]), default=_default(c[4]),
                             identity=bool(c[5]) and "AUTOINCREMENT" in sql.upper())
                for c in info
            }  # fmt: skip
            for _, index, unique, origin, _partial in conn.execute(f'PRAGMA index_list("{name}")').fetchall():
                cols = tuple(r[2] for r in conn.execute(f'PRAGMA index_info("{index}")').fetchall())
                if origin == "u":
                    out.uniques.add((name, cols))
                elif origin == "c":
                    (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE name=?", (index,)).fetchone()
                    where = ddl.split(" WHERE ", 1)[1] if " WHERE " in ddl else ""
                    out.indexes[index] = Index(table=name, columns=cols, unique=bool(unique), where=_predicate(where))
    finally:
        conn.close()
    return out


def postgres_schema(url: str) -> tuple[Schema, set[str]]:
    """The schema, and the text columns not compared bytewise (``COLLATE "C"``)."""
    import psycopg

    out = Schema()
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity, collation_name"
            " FROM information_schema.columns WHERE table_schema = current_schema()"
            " ORDER BY table_name, ordinal_position"
        ).fetchall()
        not_bytewise = {f"{t}.{c}" for t, c, dt, *_, coll in rows if dt == "text" and coll != "C"}
        for table, column, data_type, nullable, default, identity, _ in rows:
            out.columns.setdefault(table, {})[column] = Column(
                type=PG_TYPE.get(data_type, data_type), nullable=nullable == "YES", default=_default(default),
                identity=identity == "YES")  # fmt: skip
        indexes = conn.execute(
            "SELECT t.relname, i.relname, x.indisprimary, x.indisunique, am.amname,"
            " EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid),"
            " coalesce(pg_get_expr(x.indpred, x.indrelid), ''), pg_get_indexdef(x.indexrelid),"
            " ARRAY(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o)"
            "       JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.o)"
            " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
            " JOIN pg_am am ON am.oid = i.relam JOIN pg_namespace n ON n.oid = t.relnamespace"
            " WHERE n.nspname = current_schema()"
        ).fetchall()
        for table, index, primary, unique, method, constraint, where, ddl, cols in indexes:
            if primary:
                out.keys[table] = tuple(cols)
            elif method == "gin":
                searched = re.search(r"kith_unaccent\((\w+)\)|to_tsvector\('simple'::regconfig, (\w+)\)", ddl)
                assert searched, f"a GIN index over no column: {ddl}"
                out.fulltext.add((table, searched[1] or searched[2]))
            elif constraint:
                out.uniques.add((table, tuple(cols)))
            else:
                out.indexes[index] = Index(table=table, columns=tuple(cols), unique=unique, where=_predicate(where))
    for table in out.columns:
        out.keys.setdefault(table, ())
    return out, not_bytewise


def differences(a: Schema, b: Schema) -> list[str]:
    """What differs between two schemas (a: SQLite, b: PostgreSQL), one line each."""
    found: list[str] = []
    for table in sorted(a.columns.keys() | b.columns.keys()):
        if table not in b.columns or table not in a.columns:
            found.append(f"table {table}: only in {'SQLite' if table in a.columns else 'PostgreSQL'}")
            continue
        ca, cb = a.columns[table], b.columns[table]
        if list(ca) != list(cb):
            found.append(f"table {table}: columns {list(ca)} (SQLite) != {list(cb)} (PostgreSQL)")
        for column in ca.keys() & cb.keys():
            if ca[column] != cb[column]:
                found.append(f"column {table}.{column}: {ca[column]} (SQLite) != {cb[column]} (PostgreSQL)")
        if a.keys.get(table) != b.keys.get(table):
            found.append(f"table {table}: primary key {a.keys.get(table)} != {b.keys.get(table)}")
    for unique in sorted(a.uniques ^ b.uniques):
        found.append(f"unique constraint {unique}: only in {'SQLite' if unique in a.uniques else 'PostgreSQL'}")
    for name in sorted(a.indexes.keys() | b.indexes.keys()):
        if a.indexes.get(name) != b.indexes.get(name):
            found.append(f"index {name}: {a.indexes.get(name)} (SQLite) != {b.indexes.get(name)} (PostgreSQL)")
    if a.fulltext != b.fulltext:
        found.append(f"full text: {sorted(a.fulltext)} (SQLite) != {sorted(b.fulltext)} (PostgreSQL)")
    return found


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> tuple[Schema, Schema, set[str]]:
    path = tmp_path_factory.mktemp("schema") / "state.sqlite"
    open_state(path).close()
    lite = sqlite_schema(path)
    with fresh_pg_database() as url:
        open_state_url(url, pool_size=1).close()
        pg, not_bytewise = postgres_schema(url)
    return lite, pg, not_bytewise


def test_both_backends_have_the_same_components() -> None:
    assert tuple(sqlite_migrations.MIGRATIONS) == migrate.COMPONENTS
    assert tuple(pg_migrations.MIGRATIONS) == migrate.COMPONENTS


def test_sqlite_and_postgresql_schemas_are_equal(schemas: tuple[Schema, Schema, set[str]]) -> None:
    lite, pg, not_bytewise = schemas
    assert len(lite.columns) >= 25 and len(lite.indexes) >= 20 and lite.fulltext == {("turns", "content")}
    assert differences(lite, pg) == []
    assert not_bytewise == set(), 'text columns compare bytewise on PostgreSQL too (COLLATE "C")'


def test_a_difference_is_named(schemas: tuple[Schema, Schema, set[str]]) -> None:
    """The comparison can fail: each kind of drift is reported."""
    lite, _, _ = schemas
    drifted = Schema(columns={t: dict(c) for t, c in lite.columns.items()}, keys=dict(lite.keys),
                     uniques=set(lite.uniques), indexes=dict(lite.indexes), fulltext=set(lite.fulltext))  # fmt: skip
    drifted.columns["users"]["tier"] = replace(drifted.columns["users"]["tier"], type="TEXT")
    drifted.columns["extra"] = {"x": Column(type="TEXT", nullable=True, default=None, identity=False)}
    drifted.keys["dedupe"] = ("channel",)
    drifted.uniques.add(("users", ("display_name",)))
    drifted.indexes["turns_user"] = replace(drifted.indexes["turns_user"], columns=("user_id",))
    drifted.fulltext.add(("turns", "speaker"))
    found = differences(lite, drifted)
    assert len(found) == 6, found
    for what in ("users.tier", "table extra", "table dedupe: primary key", "unique constraint", "index turns_user",
                 "full text"):
        assert any(what in line for line in found), (what, found)
