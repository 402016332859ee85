"""PostgreSQL schema migrations: applied on start-up, once, under an advisory lock (nodes starting
together), refused when newer, all or nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

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
