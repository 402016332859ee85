"""Seed 004: a one-line summary of each night's curation goes to the person's notification
conversation, and to an operator log conversation, when configured."""

from __future__ import annotations

from typing import Any

from gateway.memory.background.sleep import NightResult
from gateway.state.delivery import DeliveryPrefs
from plugins.sleep_cycle import summary_line
from tests.background.conftest import BgFactory, say
from tests.background.nights import CURATION, EXTRACTION, run_night, slot_now

TOKEN = "curation-summary-token"


def test_no_line_when_no_curation_ran() -> None:
    assert summary_line(NightResult(status="nothing_to_do", scope="user:a", slot="s")) is None
    assert summary_line(NightResult(status="done", scope="user:a", slot="s", curation="already curated")) is None
    line = summary_line(NightResult(status="done", scope="user:a", slot="s", day="2026-05-09", turns=4, memories=2,
                                    curation="run sleep-s: 1 applied, 0 rejected, written=True"))
    assert line == ("Memory curation, night of 2026-05-09: 4 turns read, 2 memories kept; "
                    "profile run sleep-s: 1 applied, 0 rejected, written=True")


async def test_the_night_sends_its_summary_to_the_person_and_the_operator_log(
    bg_gateway: BgFactory, fake_anthropic: Any, ws_connect: Any
) -> None:
    gw = await bg_gateway(server={"port": 0, "token": TOKEN},
                          background={"sleep": {"curation_log_conversation": "websocket:ops"}})
    ops = await ws_connect(gw, headers={"Authorization": f"Bearer {TOKEN}"})
    await ops.hello("ops")
    await ops.ask("I keep the ops log.")  # the operator's log conversation is now known and reachable
    uid = await say(gw, "We're moving from Berlin to Munich in June!")
    gw.state.outbox.set_prefs(uid, DeliveryPrefs(notify_conversation="websocket:alice"))
    slot, at = slot_now()
    fake_anthropic.enqueue(EXTRACTION, kind="extraction")
    fake_anthropic.enqueue(CURATION, kind="curation")
    await run_night(gw, uid, slot, at)
    [mine] = [e for e in gw.state.outbox.list_for(uid) if e.kind == "notice"]
    assert mine.text.startswith("Memory curation, night of ") and "1 applied" in mine.text
    while (frame := await ops.recv())["type"] == "state":
        pass
    assert frame["notice"] and frame["text"].startswith(f"[{uid}] Memory curation")
