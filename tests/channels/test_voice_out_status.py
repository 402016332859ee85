"""While a tool runs, Telegram and Discord show "Looking that up…" (issue 31, typing and progress): a short
message of its own, sent at the turn's first tool call (``gateway_before_tool_call``) and deleted once the
answer is there, so the chat ends showing the answer only. Real gateway, platform fakes, the model the
OpenAI fake through the real SDK calling a third party's tool."""

from __future__ import annotations

from pathlib import Path

from adapters.discord import TOOL_STATUS as DC_STATUS
from adapters.telegram import TOOL_STATUS as TG_STATUS
from tests.channels.rig import ADA_DC, ADA_TG, start_rig, wait_for
from tests.fakes.openai_server import API_KEY, FakeOpenAI
from tests.tools.test_tool_loop import WeatherTools


async def test_a_tool_call_shows_a_status_that_goes_away_with_the_answer(tmp_path: Path) -> None:
    server = FakeOpenAI()
    await server.start()
    tools = WeatherTools()
    llm = {"provider": "openai", "api_key": API_KEY, "base_url": server.url, "model": "fake-gpt", "max_retries": 0}
    rig = await start_rig(tmp_path, llm=llm, plugins=(tools,), telegram={"stream": False},
                          discord={"stream": False})
    try:
        server.enqueue_tool_calls(("weather", {"city": "Porto"}))
        server.enqueue_tool_calls(("weather", {"city": "Lisbon"}))  # a second call shows nothing more
        server.enqueue("Porto and Lisbon are sunny.")
        await rig.tg_say("weather in Porto and Lisbon?")
        # The first turn ends with a note a plugin adds (plugins/schedule.py: the time zone it assumed).
        await wait_for(lambda: [t[:27] for t in rig.tg.shown(ADA_TG)] == ["Porto and Lisbon are sunny."],
                       what="the answer alone")
        events = [(e.method, e.text[:27]) for e in rig.tg.timeline if e.chat_id == ADA_TG]
        assert events == [("sendMessage", TG_STATUS), ("deleteMessage", ""),
                          ("sendMessage", "Porto and Lisbon are sunny.")], events
        assert [c for c, _ in tools.calls] == ["weather", "weather"]

        server.enqueue_tool_calls(("weather", {"city": "Oslo"}))
        server.enqueue("Oslo is sunny.")
        await rig.dc_say("and Oslo?")
        channel = ADA_DC + 1
        await wait_for(lambda: [t[:14] for t in rig.dc.shown(channel)] == ["Oslo is sunny."],
                       what="the Discord answer alone")
        dc_events = [(e.method, e.content[:14]) for e in rig.dc.timeline if e.channel_id == channel]
        assert dc_events == [("create", DC_STATUS[:14]), ("delete", ""), ("create", "Oslo is sunny.")], dc_events

        server.enqueue("No tool this time.")  # no tool: no status
        await rig.tg_say("thanks")
        await wait_for(lambda: rig.tg.shown(ADA_TG)[-1:] == ["No tool this time."], what="the third answer")
        assert sum(e.text == TG_STATUS for e in rig.tg.timeline) == 1
    finally:
        await rig.stop()
        await server.close()
