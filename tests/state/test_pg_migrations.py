"""PostgreSQL schema migrations: applied on start-up, once, under an advisory lock (processes
starting together), refused when newer, all or nothing. Each test has a database of its own."""

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


def test_a_fresh_database_gets_every_component_once() -> None:
    with fresh_pg_database() as url:
        open_state_url(url).close()
        state = open_state_url(url)  # nothing to do the second time
        try:
            found = select_rows(state, "SELECT component, version FROM schema_version")
            rows = {r["component"]: r["version"] for r in found}
            assert rows == {c: migrations.latest(c) for c in migrations.COMPONENTS}
        finally:
            state.close()


def test_nodes_starting_together_all_succeed_and_apply_each_step_once() -> None:
    with fresh_pg_database() as url:
        errors: list[BaseException] = []
        barrier = threading.Barrier(4)

        def start() -> None:
            barrier.wait()
            try:
                open_state_url(url).close()
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=start) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        state = open_state_url(url)
        try:
            assert len(select_rows(state, "SELECT component FROM schema_version")) == len(migrations.COMPONENTS)
        finally:
            state.close()


def test_two_processes_starting_together_apply_each_step_once() -> None:
    """Two interpreters (as two nodes would), released together: both open. Step 1 creates its tables
    without IF NOT EXISTS, so a second application would fail its process."""
    with fresh_pg_database() as url:
        code = ("import sys, time; from gateway.state import open_state_url; go = float(sys.argv[2])\n"
                "while time.time() < go: time.sleep(0.001)\n"
                "open_state_url(sys.argv[1]).close()")  # fmt: skip
        go = str(time.time() + 3.0)  # both interpreters have imported by then
        procs = [subprocess.Popen([sys.executable, "-c", code, url, go], stderr=subprocess.PIPE) for _ in range(2)]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], errors
        state = open_state_url(url)
        try:
            found = select_rows(state, "SELECT component, version FROM schema_version")
            assert {r["component"]: r["version"] for r in found} == {c: migrations.latest(c)
                                                                     for c in migrations.COMPONENTS}  # fmt: skip
        finally:
            state.close()


def test_a_newer_schema_is_refused_and_a_failing_step_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with fresh_pg_database() as url:
        state = open_state_url(url)
        write_rows(state, "UPDATE schema_version SET version=99 WHERE component='usage'")
        with pytest.raises(SchemaError, match="newer kith"):
            open_state_url(url)
        write_rows(state, "UPDATE schema_version SET version=1 WHERE component='usage'")
        bad = (*migrations.MIGRATIONS["usage"], ("a broken step", ("CREATE TABLE usage_extra (x BIGINT)",
                                                                    "SELECT no_such_function()")))  # fmt: skip
        monkeypatch.setitem(migrations.MIGRATIONS, "usage", bad)
        with pytest.raises(SchemaError, match="nothing was changed"):
            open_state_url(url)
        assert select_rows(state, "SELECT to_regclass('usage_extra') IS NULL")[0][0] is True
        assert select_rows(state, "SELECT version FROM schema_version WHERE component='usage'")[0][0] == 1
        state.close()
