"""Streaming through the real gateway: the Anthropic fake streams a reply over SSE to the real SDK, the
turn hands its deltas to the Telegram and Discord adapters, and the chats see it grow by edits."""

from __future__ import annotations

from pathlib import Path

from adapters._split import markdown_to_telegram_html
from tests.channels.rig import ADA_DC, ADA_TG, start_rig, wait_for
from tests.fakes.anthropic import API_KEY, FakeAnthropic

STREAM = {"stream_interval_s": 0.05, "stream_first_chars": 20}


async def test_a_model_reply_streams_into_telegram_and_discord(tmp_path: Path) -> None:
    fake = await FakeAnthropic().start()
    fake.chunk_delay_s = 0.004  # 8 characters every 4 ms: ~0.5 s for the reply below
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm, telegram={**STREAM, "stream_drafts": False}, discord=STREAM)
    try:
        reply = "**Sure.** " + " ".join(f"step {i} of the plan;" for i in range(45))
        fake.enqueue(reply)
        await rig.tg_say("plan my day")
        await wait_for(lambda: rig.count_rows("SELECT COUNT(*) FROM turns WHERE role='assistant'") == 1,
                       what="the turn is stored")
        (stored,) = [r["content"] for r in rig.select_rows("SELECT content FROM turns WHERE role='assistant'")]
        # The reply as the turn returned it: the model's, and a note a plugin appended after the stream
        # (plugins/schedule.py offers the time zone it assumed on a first turn).
        assert stored.startswith(reply) and stored != reply
        html = markdown_to_telegram_html(stored)
        await wait_for(lambda: rig.tg.shown(ADA_TG) == [html], what="the Telegram chat shows the reply")
        events = [e for e in rig.tg.timeline if e.chat_id == ADA_TG]
        assert events[0].method == "sendMessage" and sum(e.method == "editMessageText" for e in events) >= 3
        assert events[-1].text == html

        fake.enqueue(reply)
        await rig.dc_say("and on Discord?")
        channel = ADA_DC + 1
        await wait_for(lambda: rig.count_rows("SELECT COUNT(*) FROM turns WHERE role='assistant'") == 2,
                       what="the Discord turn is stored")
        (stored_dc,) = [r["content"] for r in rig.select_rows(
            "SELECT content FROM turns WHERE role='assistant' AND channel='discord'")]
        await wait_for(lambda: rig.dc.shown(channel) == [stored_dc], what="the Discord DM shows the reply")
        events_dc = [e for e in rig.dc.timeline if e.channel_id == channel]
        assert events_dc[0].method == "create" and sum(e.method == "edit" for e in events_dc) >= 3
    finally:
        await rig.stop()
        await fake.stop()
