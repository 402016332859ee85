"""PostgreSQL schema migrations: applied on start-up, once, under an advisory lock (nodes starting
together), refused when newer, all or nothing."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from gateway.state import SchemaError, open_state_url
from gateway.state.postgres import migrations
from tests.pg import fresh_pg_database
from tests.storage import select_rows, write_rows

RACER = ("import sys, time; from gateway.state import open_state_url; go = float(sys.argv[2])\n"
         "while time.time() < go: time.sleep(0.001)\n"
         "open_state_url(sys.argv[1]).close()")  # fmt: skip


def test_nodes_starting_together_on_a_fresh_database_apply_each_step_once() -> None:
    """Two interpreters (as two nodes would) and two threads of this one, released together on a new
    database: all open it. Step 1 creates its tables without IF NOT EXISTS, so a second application
    would fail its racer."""
    with fresh_pg_database() as url:
        go = time.time() + 2.0  # the interpreters have imported by then
        procs = [subprocess.Popen([sys.executable, "-c", RACER, url, str(go)], stderr=subprocess.PIPE)
                 for _ in range(2)]  # fmt: skip
        errors: list[BaseException] = []

        def start() -> None:
            while time.time() < go:
                time.sleep(0.001)
            try:
                open_state_url(url).close()
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=start) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stderr = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], stderr
        assert errors == []
        state = open_state_url(url)  # and once more: nothing to do
        try:
            found = select_rows(state, "SELECT component, version FROM schema_version")
            assert {r["component"]: r["version"] for r in found} == {c: migrations.latest(c)
                                                                     for c in migrations.COMPONENTS}  # fmt: skip
        finally:
            state.close()


def test_a_newer_schema_is_refused_and_a_failing_step_changes_nothing(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = open_state_url(pg_url)
    try:
        write_rows(state, "UPDATE schema_version SET version=99 WHERE component='usage'")
        with pytest.raises(SchemaError, match="newer kith"):
            open_state_url(pg_url)
        write_rows(state, "UPDATE schema_version SET version=1 WHERE component='usage'")
        bad = (*migrations.MIGRATIONS["usage"], ("a broken step", ("CREATE TABLE usage_extra (x BIGINT)",
                                                                    "SELECT no_such_function()")))  # fmt: skip
        monkeypatch.setitem(migrations.MIGRATIONS, "usage", bad)
        with pytest.raises(SchemaError, match="nothing was changed"):
            open_state_url(pg_url)
        assert select_rows(state, "SELECT to_regclass('usage_extra') IS NULL")[0][0] is True
        assert select_rows(state, "SELECT version FROM schema_version WHERE component='usage'")[0][0] == 1
    finally:
        write_rows(state, "UPDATE schema_version SET version=1 WHERE component='usage'")  # the session's database
        state.close()


ROLE_PREFIX = "kith_test_role_"


def _drop_stale_roles(admin: Any) -> None:
    """Roles left by a killed run (its pid is in the name): roles are the server's, not a database's."""
    from tests.pg import _alive

    for (name,) in admin.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (ROLE_PREFIX + "%",)):
        pid = name[len(ROLE_PREFIX):].split("_")[0]
        if pid.isdigit() and not _alive(int(pid)):
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')


def test_without_unaccent_search_works_unfolded_and_folds_from_the_start_after_it_is_created(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A role that may not create extensions (as on a managed server): state step 2 still applies, search
    matches words as before, the log and ``kith doctor`` say diacritics are not folded. Once an
    administrator creates the extension, the next start uses it and rebuilds the index."""
    import psycopg

    from gateway.ops.doctor import _check_postgres
    from gateway.state import TranscriptEntry
    from tests.pg import SERVER

    role = f"{ROLE_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:6]}"
    at = datetime(2026, 3, 1, tzinfo=UTC)
    try:
        with fresh_pg_database() as url:  # drops the databases of killed runs first, so their roles own nothing
            with psycopg.connect(url, autocommit=True) as admin:
                _drop_stale_roles(admin)
                admin.execute(f'CREATE ROLE "{role}" LOGIN')
                admin.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{role}"')  # not CREATE on the database
            parts = urlsplit(url)
            role_url = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
            with caplog.at_level(logging.WARNING, logger="kith.state"):
                state = open_state_url(role_url)
            try:
                assert "does not fold diacritics" in caplog.text
                assert select_rows(state, "SELECT version FROM schema_version WHERE component='state'")[0][0] == 2
                state.users.create("u1", display_name="U1", timezone="UTC", at=at)
                state.sessions.create("s1", user_id="u1", scope_key="user:u1", conversation_key="web:u1",
                                      persona="default", at=at)  # fmt: skip
                state.turns.append(TranscriptEntry(turn_id="t1", session_id="s1", user_id="u1", role="user",
                                                   content="Café Müller", channel="web", conversation_key="web:u1",
                                                   speaker="", created_at=at))  # fmt: skip
                assert state.turns.search_sessions("u1", "café müller") == ["s1"]  # as before: exact letters
                assert state.turns.search_sessions("u1", "cafe") == []
            finally:
                state.close()
            checks = asyncio.run(_check_postgres(role_url))
            assert [(c.name, c.status) for c in checks] == [("state", "ok"), ("full text", "warn")]
            assert "CREATE EXTENSION unaccent" in checks[1].detail

            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("CREATE EXTENSION unaccent")
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="kith.state"):
                state = open_state_url(role_url)
            try:
                assert "index turns_words rebuilt" in caplog.text
                assert state.turns.search_sessions("u1", "cafe muller") == ["s1"]
                assert state.turns.search_sessions("u1", "Café") == ["s1"]
            finally:
                state.close()
            checks = asyncio.run(_check_postgres(role_url))
            assert [(c.name, c.status) for c in checks] == [("state", "ok"), ("full text", "ok")]
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_a_database_of_state_step_1_gets_the_folding_index(pg_url: str) -> None:
    state = open_state_url(pg_url)
    try:
        write_rows(state, "DROP INDEX turns_words")
        write_rows(state, "CREATE INDEX turns_words ON turns USING gin (to_tsvector('simple', content))")
        write_rows(state, "UPDATE schema_version SET version=1 WHERE component='state'")
        open_state_url(pg_url).close()
        assert select_rows(state, "SELECT version FROM schema_version WHERE component='state'")[0][0] == 2
        assert "kith_unaccent(content)" in select_rows(state, "SELECT pg_get_indexdef('turns_words'::regclass)")[0][0]
    finally:
        state.close()
