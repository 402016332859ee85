"""Seed 004 curation inputs: the nightly USER.md curation also reads the last 3 days of dated memories
(about 8,000 characters), not only what tonight learnt."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.memory.files import dated
from gateway.memory.files.store import MemoryStore
from tests.background.conftest import BgFactory, say
from tests.background.nights import CURATION, EXTRACTION, run_night, slot_now


def test_recent_text_is_the_window_newest_first_within_the_cap(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    today = date(2026, 5, 9)
    for back, line in ((0, "today's line"), (2, "two days ago"), (3, "three days ago")):
        store.write(dated.path_of(today - timedelta(days=back)), f"# Memories\n- {line}\n", source="test")
    text = dated.recent_text(store, today, days=3, max_chars=8000)
    assert text.index("today's line") < text.index("two days ago") and "three days ago" not in text
    store.write(dated.path_of(today - timedelta(days=1)), "# Memories\n" + "- filler line\n" * 1000, source="test")
    capped = dated.recent_text(store, today, days=3, max_chars=8000)
    assert len(capped) <= 8000 and "today's line" in capped and "two days ago" not in capped  # oldest goes first


async def test_the_night_curation_prompt_holds_the_last_three_days(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    gw = await bg_gateway()
    uid = await say(gw, "We're moving from Berlin to Munich in June!")
    today = datetime.now(UTC).date()
    store = gw.memory_store(uid)
    store.write(dated.path_of(today - timedelta(days=2)), "# Memories\n- Alice started learning the cello.\n",
                source="test")
    store.write(dated.path_of(today - timedelta(days=5)), "# Memories\n- Alice sold her old bike.\n", source="test")
    slot, at = slot_now()
    fake_anthropic.enqueue(EXTRACTION, kind="extraction")
    fake_anthropic.enqueue(CURATION, kind="curation")
    await run_night(gw, uid, slot, at)
    prompt = fake_anthropic.requests[-1]["messages"][0]["content"]
    assert "CURRENT USER.md" in prompt
    recent = prompt.split("DATED MEMORIES OF THE LAST 3 DAYS")[1].split("LEARNED RECENTLY")[0]
    assert "learning the cello" in recent and "moving from Berlin to Munich" in recent  # earlier days and tonight's
    assert "old bike" not in recent  # outside the window
