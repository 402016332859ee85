"""A throwaway database on a PostgreSQL server, for benchmarks (``kith bench turn --state-url``): created
under a random name next to the one the URL names, dropped on exit, so a benchmark never touches a
database that holds anything."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


@contextmanager
def scratch_database(url: str, prefix: str = "kith_scratch_") -> Iterator[str]:
    """The URL of a new empty database on ``url``'s server (the role needs CREATEDB)."""
    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
