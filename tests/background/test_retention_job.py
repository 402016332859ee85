"""Acceptance 5 (issue 6): the retention job's cutoff is exact at the day boundary, in the user's
timezone, for dated files, their chunks and facts; the profile is never pruned; and the timestamp
trap of seed 004 (``isoformat()`` vs SQLite's space form) does not bite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.memory.background.retention_cutoff import cutoff_instant, expired_items, sqlite_cutoff
from gateway.memory.files.scopes import user_scope
from tests.background.conftest import BgFactory, say
from tests.storage import write_rows

TZ = "Europe/Berlin"  # CET (+01:00) in March: local midnight of 3 March is 2 March 23:00 UTC
NOW = datetime(2024, 3, 10, 11, 0, tzinfo=UTC)  # local date 10 March; 7 days kept -> from 3 March on


def log_block(hms: str, turn: str, text: str) -> str:
    return f"\n## {hms} · websocket · session s1 · turn {turn}\n\n**Alice:** {text}\n\n**assistant:** Noted.\n"


FILES = {
    "memories/2024-03-02.md": "# Memories 2024-03-02\n\n- Alice bought a red kayak.\n",
    "memories/2024-03-03.md": "# Memories 2024-03-03\n\n- Alice painted the hallway green.\n",
    "sessions/2024-03-02.md": "# Sessions 2024-03-02\n" + log_block("23:59:59", "t-old", "The kayak is red."),
    "sessions/2024-03-03.md": "# Sessions 2024-03-03\n" + log_block("00:00:00", "t-new", "The hallway is green."),
    "sessions/2024-03-02-evening.md": "# Session summary 2024-03-02, evening\n\nKayak shopping.\n",
    "sessions/2024-03-03-night.md": "# Session summary 2024-03-03, night\n\nPainting.\n",
    "USER.md": "# Alice\n\n## Identity\n- Lives in Berlin since 2019.\n",
    "MEMORY_SHORT.md": "# Recent sessions\n\n## 2024-01-01\n\nOld digest.\n",
    "people/websocket-bob.md": "# Bob\n\nMet in 2020.\n",
    "notes.md": "# Notes\n\n- 2023-01-01 idea: build a shed.\n",
}


async def test_retention_cutoff_is_exact_at_the_local_day_boundary(bg_gateway: BgFactory) -> None:
    gw = await bg_gateway(background={"retention": {"memory_retention_days": 7}})
    uid = await say(gw, "hello")
    write_rows(gw.state, "UPDATE users SET timezone=? WHERE user_id=?", TZ, uid)
    store = gw.memory_store(uid)
    for rel, text in FILES.items():
        store.write(rel, text, source="test")
    cut = cutoff_instant(NOW, 7, TZ)
    assert cut == datetime(2024, 3, 2, 23, 0, tzinfo=UTC)
    tick = timedelta(microseconds=1)
    ended_before = gw.kg.add(uid, uid, "visiting", "Hamburg", valid_from="2024-02-20", valid_until=cut - tick).fact
    # Given as an isoformat() string with 'T' and an offset: stored canonically, compared as instants.
    ended_at = gw.kg.add(uid, uid, "staying_in", "Kiel", valid_from="2024-02-25", valid_until=cut.isoformat()).fact
    durable = gw.kg.add(uid, uid, "works_at", "Acme", valid_from="2020-01-01").fact
    await gw.settle()
    scope = user_scope(uid)
    assert any("red" in h.text for h in await gw.memory.recall(scope=scope, query="kayak red", k=5))

    await gw.bus.enqueue("retention", {"user_id": uid, "slot": "2024-03-10T12:15", "tz": TZ,
                                       "scheduled_for": NOW.isoformat()}, job_id="retention-test")  # fmt: skip
    await gw.settle()

    left = {e.path for e in store.files()}
    assert {"memories/2024-03-02.md", "sessions/2024-03-02.md", "sessions/2024-03-02-evening.md"}.isdisjoint(left)
    assert {"memories/2024-03-03.md", "sessions/2024-03-03.md", "sessions/2024-03-03-night.md", "USER.md",
            "MEMORY_SHORT.md", "people/websocket-bob.md", "notes.md"} <= left  # fmt: skip
    for rel in ("USER.md", "MEMORY_SHORT.md", "people/websocket-bob.md", "notes.md"):
        assert store.read(rel) == FILES[rel]  # the profile and durable files are never pruned by age
    facts = {f.id for f in gw.kg.all(uid)}
    assert ended_before.id not in facts and {ended_at.id, durable.id} <= facts
    # Chunks went with their files: 23:59:59 on the 2nd is gone, 00:00:00 on the 3rd is still found.
    assert not any("red" in h.text for h in await gw.memory.recall(scope=scope, query="kayak red", k=10))
    assert any("green" in h.text for h in await gw.memory.recall(scope=scope, query="hallway green", k=10))


def test_the_timestamp_trap_would_have_deleted_the_boundary_day() -> None:
    """Why everything is compared as instants: SQLite's ``datetime('now')`` form against an
    ``isoformat()`` cutoff puts every row of the cutoff day before it ('T' sorts after ' ')."""
    cut = cutoff_instant(NOW, 7, "UTC")  # 2024-03-03 00:00 UTC
    same_day_rows = ["2024-03-03 00:00:00", "2024-03-03 08:00:00", "2024-03-03 23:59:59"]
    wrong = [r for r in same_day_rows if r < cut.replace(tzinfo=None).isoformat()]
    assert wrong == same_day_rows  # the bug: a whole kept day counted as expired
    assert [r for r in same_day_rows if r < sqlite_cutoff(NOW, 7, "UTC")] == []
    items: list[tuple[str, Any]] = [(r, r) for r in [*same_day_rows, "2024-03-02 23:59:59"]]
    assert expired_items(items, now=NOW, retention_days=7, tz="UTC") == ["2024-03-02 23:59:59"]
