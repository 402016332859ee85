"""PostgreSQL for the tests: the local server (127.0.0.1:5432, trust auth, user postgres), one random
database per test session, emptied between tests and dropped at the end (on failure too; a database
left by a killed session is dropped by the next one, found by the pid in its name).

Fixtures (imported by tests/conftest.py):
* ``pg_url``: the session database's URL, emptied (every table's rows deleted, identities restarted);
  skips with a reason when the server is unreachable;
* ``state_url``: parametrised ``sqlite`` (None) and ``postgresql`` (``pg_url``);
* ``any_state``: an open ``State`` on each backend, closed after the test.
* ``fresh_pg_database()``: a database of its own (migration tests), dropped on exit.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gateway.state import State, open_configured

SERVER = os.environ.get("KITH_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
PREFIX = "kith_test_"


def _admin() -> object:
    import psycopg

    return psycopg.connect(f"{SERVER}/postgres", autocommit=True, connect_timeout=3)


def _reachable() -> str | None:
    """None when the server answers, else why not."""
    try:
        with _admin() as conn:  # type: ignore[attr-defined]
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {SERVER} is unreachable: {exc}"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop_stale(conn: object) -> None:
    """Drop test databases whose pytest process is gone (a killed run)."""
    names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s",  # type: ignore[attr-defined]
                                         (PREFIX + "%",)).fetchall()]  # fmt: skip
    for name in names:
        try:
            pid = int(name[len(PREFIX):].split("_")[0])
        except ValueError:
            continue
        if not _alive(pid):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[attr-defined]


def create_database() -> str:
    name = f"{PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with _admin() as conn:  # type: ignore[attr-defined]
        _drop_stale(conn)
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    with _admin() as conn:  # type: ignore[attr-defined]
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_pg_database() -> Iterator[str]:
    """A new empty database's URL (skips when the server is unreachable); dropped on exit."""
    reason = _reachable()
    if reason:
        pytest.skip(reason)
    name = create_database()
    try:
        yield f"{SERVER}/{name}"
    finally:
        drop_database(name)


@pytest.fixture(scope="session")
def _pg_session() -> Iterator[str | None]:
    if _reachable():
        yield None
        return
    name = create_database()
    try:
        yield f"{SERVER}/{name}"
    finally:
        drop_database(name)


def empty_database(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename != 'schema_version'"
        ).fetchall()]  # fmt: skip
        identities = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND is_identity = 'YES'"
        ).fetchall()
        # DELETE, not TRUNCATE: on a few small tables it is several times faster (no new files).
        script = [f'DELETE FROM "{t}"' for t in tables]
        script += [f'ALTER TABLE "{t}" ALTER COLUMN "{c}" RESTART WITH 1' for t, c in identities]
        if script:
            conn.execute("; ".join(script))


@pytest.fixture
def pg_url(_pg_session: str | None) -> str:
    if _pg_session is None:
        pytest.skip(_reachable() or "PostgreSQL is unreachable")
    empty_database(_pg_session)
    return _pg_session


@pytest.fixture(params=["sqlite", "postgresql"])
def state_url(request: pytest.FixtureRequest) -> str | None:
    """None (SQLite, the default) or the URL of an emptied PostgreSQL database."""
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def any_state(state_url: str | None, tmp_path: Path) -> Iterator[State]:
    state = open_configured(tmp_path, state_url)
    try:
        yield state
    finally:
        state.close()
