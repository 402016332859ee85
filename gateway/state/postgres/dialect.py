"""SQLite statements as PostgreSQL runs them.

The SQLite stores' SQL is kept to a portable subset; the PostgreSQL backend runs the same statements
after this rewrite, so each query exists once and both backends answer alike. What it rewrites:

* placeholders: ``?`` -> ``%s``, ``:name`` -> ``%(name)s`` (and ``%`` -> ``%%``: every statement is sent with
  arguments, possibly none, so psycopg always reads ``%``);
* ``INSERT OR IGNORE`` -> ``INSERT ... ON CONFLICT DO NOTHING``;
* ``INSERT OR REPLACE INTO t(cols)`` -> ``INSERT ... ON CONFLICT (key of t) DO UPDATE SET`` every other column;
* scalar ``max(a, b)`` / ``min(a, b)`` (two arguments) -> ``GREATEST`` / ``LEAST``;
* ``rowid`` -> ``ctid`` (the physical row id: only ever used to pick rows of one statement).

String literals are left alone. A statement the stores write in SQLite-only SQL (full text, the
schema catalogue, pragmas) is overridden in ``gateway.state.postgres.stores`` instead.
"""

from __future__ import annotations

import re
from functools import lru_cache

# The primary key of each table written with INSERT OR REPLACE (a conflict target PostgreSQL needs).
REPLACE_KEYS: dict[str, tuple[str, ...]] = {
    "access_approved": ("channel", "account_id"),
    "turn_contexts": ("turn_id",),
    "bg_writer": ("session_id",),
}

_LITERAL = re.compile(r"('(?:[^']|'')*')")
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_SCALAR_MINMAX = re.compile(r"\b(max|min)\(([^(),]+),([^(),]+)\)", re.IGNORECASE)
_ROWID = re.compile(r"\browid\b")
_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_OR_REPLACE = re.compile(r"^\s*INSERT\s+OR\s+REPLACE\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE)


def _code(part: str) -> str:
    part = part.replace("%", "%%").replace("?", "%s")
    part = _NAMED.sub(r"%(\1)s", part)
    part = _SCALAR_MINMAX.sub(lambda m: ("GREATEST" if m[1].lower() == "max" else "LEAST") + f"({m[2]},{m[3]})", part)
    return _ROWID.sub("ctid", part)


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """``sql`` (SQLite, as the stores write it) in PostgreSQL's dialect, for psycopg's ``%s`` style."""
    suffix = ""
    replace = _OR_REPLACE.match(sql)
    if replace:
        table, columns = replace[1], [c.strip() for c in replace[2].split(",")]
        key = REPLACE_KEYS[table]
        rest = [c for c in columns if c not in key]
        sql = "INSERT INTO" + sql[sql.upper().index("REPLACE INTO") + len("REPLACE INTO"):]
        suffix = f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in rest)
    elif _OR_IGNORE.match(sql):
        sql = _OR_IGNORE.sub("INSERT INTO", sql, count=1)
        suffix = " ON CONFLICT DO NOTHING"
    if suffix and re.search(r"\bRETURNING\b", sql, re.IGNORECASE):
        head, tail = re.split(r"\bRETURNING\b", sql, maxsplit=1, flags=re.IGNORECASE)
        sql, suffix = head, suffix + " RETURNING" + tail
    parts = _LITERAL.split(sql + suffix)
    # psycopg reads ``%`` everywhere in a statement with arguments, literals included.
    return "".join(p.replace("%", "%%") if i % 2 else _code(p) for i, p in enumerate(parts))
