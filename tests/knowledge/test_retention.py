"""Retention cutoff: exact at the local day boundary, and immune to the isoformat/SQLite trap."""

from __future__ import annotations

import sqlite3
from datetime import UTC, date, datetime, timedelta

from gateway.memory.background import retention_cutoff

BERLIN = "Europe/Berlin"
# 2024-03-10 00:30 in Berlin is still 2024-03-09 in UTC: the local date must win.
NOW = datetime(2024, 3, 9, 23, 30, tzinfo=UTC)


def test_cutoff_is_local_midnight_of_the_oldest_kept_day() -> None:
    assert retention_cutoff.local_today(NOW, BERLIN) == date(2024, 3, 10)
    assert retention_cutoff.cutoff_date(NOW, 7, BERLIN) == date(2024, 3, 3)
    assert retention_cutoff.cutoff_instant(NOW, 7, BERLIN) == datetime(2024, 3, 2, 23, 0, tzinfo=UTC)
    assert retention_cutoff.cutoff_instant(NOW, 7, "UTC") == datetime(2024, 3, 2, tzinfo=UTC)


def test_chunks_exact_at_the_boundary() -> None:
    cut = retention_cutoff.cutoff_instant(NOW, 7, BERLIN)
    items = [
        ("last-second-of-expired-day", "2024-03-02 22:59:59"),
        ("first-second-of-kept-day", "2024-03-02 23:00:00"),
        ("same-instant-isoformat", "2024-03-02T23:00:00+00:00"),
        ("same-instant-local-offset", "2024-03-03T00:00:00+01:00"),
        ("expired-by-a-microsecond", "2024-03-02T22:59:59.999999Z"),
        ("epoch", str(cut.timestamp() - 1)),
        ("garbage", "yesterday-ish"),
    ]
    got = retention_cutoff.expired_items(items, now=NOW, retention_days=7, tz=BERLIN)
    assert got == ["last-second-of-expired-day", "expired-by-a-microsecond", "epoch"]


def test_dated_files_follow_the_same_day_rule() -> None:
    rels = [
        "memories/2024-03-02.md",
        "memories/2024-03-03.md",
        "memories/2024-03-10.md",
        "memories/2023-12-31.md",
        "memories/2024-02-30.md",  # not a date: never deleted
        "memories/notes.md",
        "memories/archive/2020-01-01.md",
        "sessions/2020-01-01-evening.md",  # not a retention dir by default
        "USER.md",
    ]
    got = retention_cutoff.expired_dated_files(rels, now=NOW, retention_days=7, tz=BERLIN)
    assert got == ["memories/2024-03-02.md", "memories/2023-12-31.md"]
    with_sessions = retention_cutoff.expired_dated_files(
        rels, now=NOW, retention_days=7, tz=BERLIN, dirs=("memories/", "sessions/")
    )
    assert "sessions/2020-01-01-evening.md" in with_sessions


def test_zero_or_none_means_keep_forever() -> None:
    for days in (0, -1, None):
        old = ["memories/1999-01-01.md"]
        assert retention_cutoff.expired_dated_files(old, now=NOW, retention_days=days, tz="UTC") == []
        assert retention_cutoff.expired_items([("a", "1999-01-01")], now=NOW, retention_days=days, tz="UTC") == []


def test_sqlite_cutoff_avoids_the_isoformat_trap() -> None:
    """Rows written by SQLite's datetime('now') use a space; isoformat uses 'T', which sorts after
    every space-separated row of the same date, so a string cutoff built with isoformat deletes the
    whole cutoff day. The helper's cutoff deletes exactly the rows before the instant."""
    now = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, created_at TEXT DEFAULT (datetime('now')))")
    stamps = ["2024-03-02 23:59:59", "2024-03-03 00:00:00", "2024-03-03 08:00:00", "2024-03-03 23:59:59"]
    conn.executemany("INSERT INTO chunks (created_at) VALUES (?)", [(s,) for s in stamps])
    conn.execute("INSERT INTO chunks DEFAULT VALUES")  # really produced by SQLite: same shape
    produced = conn.execute("SELECT created_at FROM chunks WHERE id = 5").fetchone()[0]
    assert " " in produced and "T" not in produced

    good = retention_cutoff.sqlite_cutoff(now, 7, "UTC")
    assert good == "2024-03-03 00:00:00"
    assert conn.execute("SELECT count(*) FROM chunks WHERE created_at < ?", (good,)).fetchone() == (1,)

    trap = retention_cutoff.cutoff_instant(now, 7, "UTC").replace(tzinfo=None).isoformat()
    assert trap == "2024-03-03T00:00:00"
    # The buggy comparison would also take all three rows of the kept day 2024-03-03.
    assert conn.execute("SELECT count(*) FROM chunks WHERE created_at < ?", (trap,)).fetchone() == (4,)


def test_db_cutoff_matches_kith_stored_format() -> None:
    assert retention_cutoff.db_cutoff(NOW, 1, BERLIN) == "2024-03-08 23:00:00.000000"
    # Europe switched to summer time on 2024-03-31: local midnight is 22:00 UTC after, 23:00 before,
    # and the two cutoffs two local days apart are 47 hours apart.
    summer = datetime(2024, 4, 2, 12, tzinfo=UTC)
    after = retention_cutoff.cutoff_instant(summer, 1, BERLIN)
    before = retention_cutoff.cutoff_instant(summer, 3, BERLIN)
    assert after == datetime(2024, 3, 31, 22, tzinfo=UTC)
    assert before == datetime(2024, 3, 29, 23, tzinfo=UTC)
    assert after - before == timedelta(hours=47)
