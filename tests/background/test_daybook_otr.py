"""The day book's budget (interactive first, head+tail cuts) and Off-The-Record: OTR turns never
reach the writer, the night or any payload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from gateway.memory.background.daybook import TurnRow, gather
from tests.background.conftest import BgFactory, say, user_id
from tests.background.nights import run_night, slot_now


def rows(session: str, channel: str, n: int, start: int, words: str) -> list[TurnRow]:
    t0 = datetime(2024, 5, 1, 9, tzinfo=UTC)
    return [TurnRow(seq=start + i, session_id=session, role="user" if i % 2 == 0 else "assistant",
                    content=f"{words} {i} " + "x" * 200, channel=channel, speaker="Alice", user_id="alice",
                    created_at=t0 + timedelta(minutes=i)) for i in range(n)]  # fmt: skip


def test_gather_puts_interactive_first_and_cuts_head_and_tail() -> None:
    interactive = rows("s1", "telegram", 60, 1, "chat")
    automated = rows("s2", "cron", 60, 100, "briefing")
    book = gather(interactive + automated, budget=6000, interactive_share=0.8, head_share=0.4,
                  automated_channels=("cron",), tz=ZoneInfo("Europe/Berlin"))  # fmt: skip
    assert len(book.text) <= 6000 + 200
    assert book.text.index("Interactive conversations") < book.text.index("Automated conversations")
    inter = book.text[: book.text.index("## Automated")]
    assert "chat 0 " in inter and "chat 59 " in inter and "characters omitted" in inter  # head and tail kept
    assert len(inter) > 4000  # most of the budget went to the interactive conversation
    assert book.upto_seq == 159 and book.turns == 120 and book.truncated == 2
    assert "[11:00]" in inter  # local time of the user's timezone (09:00 UTC is 11:00 in Berlin in May)


async def test_otr_turns_reach_no_background_job(bg_gateway: BgFactory, fake_anthropic: Any) -> None:
    gw = await bg_gateway(background={"writer": {"turn_threshold": 1}})
    await say(gw, "/otr on")
    await say(gw, "My secret: the vault code is 4711.", "Another secret turn.")
    await say(gw, "/otr off")
    await gw.settle()
    status = {q.name: q for q in await gw.bus.status()}
    assert "memory_writer" not in status or status["memory_writer"].pending + status["memory_writer"].delayed == 0
    uid = user_id(gw)
    slot, at = slot_now()
    await run_night(gw, uid, slot, at)
    assert not any("DAY'S CONVERSATIONS" in str(r) for r in fake_anthropic.requests)  # nothing to extract
    store = gw.memory_store(uid)
    assert all("4711" not in store.read(e.path) for e in store.files())
