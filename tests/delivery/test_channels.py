"""Acceptance (issue 16): a reminder set in the web chat while the tab is open is delivered when the
tab reopens (shown as missed), and to Telegram when the person is linked there and prefers it.

Real gateway, real Telegram adapter against the local fake Bot API, real WebSocket adapter, the
schedule engine arming the reminders on the job bus; nothing of kith's is replaced.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.schedule.engine import sync_user
from gateway.state.delivery import DeliveryPrefs
from tests.channels.rig import ADA_TG, Rig, start_rig, wait_for


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    r = await start_rig(tmp_path)
    yield r
    await r.stop()


async def _remind(rig: Rig, uid: str, rid: str, text: str, seconds: float) -> None:
    due = (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)
    store = rig.gw.memory_store(uid)
    old = store.read("REMINDERS.md") if store.exists("REMINDERS.md") else "# Reminders\n\n"
    line = (f"- [ ] {due:%Y-%m-%d %H:%M} (UTC) {text} <!-- reminder id={rid} to=websocket:ada-tab "
            f"due={due:%Y-%m-%dT%H:%M:%SZ} -->\n")
    store.write("REMINDERS.md", old + line, source="test")
    await sync_user(rig.gw, uid, ("REMINDERS.md",))


async def _hello(http: aiohttp.ClientSession, rig: Rig) -> tuple[aiohttp.ClientWebSocketResponse, dict[str, Any]]:
    ws = await http.ws_connect(f"{rig.base}/ws")
    await ws.send_json({"type": "hello", "client_id": "ada-tab"})
    ready = await ws.receive_json(timeout=10)
    assert ready["type"] == "ready", ready
    return ws, ready


async def test_web_reminder_waits_for_the_tab_then_goes_to_preferred_telegram(rig: Rig) -> None:
    await rig.tg_say("hello")
    await rig.tg.wait_sent(1)
    ada = rig.gw.identities.lookup("telegram", str(ADA_TG))
    assert ada is not None
    with rig.gw.state.tx():  # her web chat is linked to her (as /link or a sign-in would)
        rig.gw.state.identities.add("websocket", "ada-tab", ada, source="test")
    outbox = rig.gw.state.outbox
    async with aiohttp.ClientSession() as http:
        ws, ready = await _hello(http, rig)
        assert ready["user_id"] == ada
        await _remind(rig, ada, "r0a01", "stretch", 2)  # set while the tab is open ...
        await ws.close()  # ... which is closed before it is due
        await wait_for(lambda: any(e.status == "missed" for e in outbox.list_for(ada)), 20, "missed")
        before = len(rig.tg.sent)
        ws, _ = await _hello(http, rig)  # the tab reopens: the reminder is there, marked missed
        frame = await ws.receive_json(timeout=10)
        assert frame["type"] == "reply" and frame["missed"] is True and frame["text"] == "Reminder: stretch"
        assert len(rig.tg.sent) == before  # not also sent to Telegram: she prefers no other channel
        await ws.close()

        outbox.set_prefs(ada, DeliveryPrefs(preferred_channel="telegram"))
        await _remind(rig, ada, "r0a02", "call Sam", 2)  # set in the web chat again, tab closed
        sent = await rig.tg.wait_sent(before + 1, timeout=20)
        assert sent[-1].chat_id == ADA_TG and "call Sam" in sent[-1].text
        # The row is marked sent (with its channel) just after Telegram has the message: wait for it.
        await wait_for(lambda: any(e.text == "Reminder: call Sam" and e.channel == "telegram"
                                   for e in outbox.list_for(ada)), 20, "the Telegram delivery recorded")
        entries = {e.text: e for e in outbox.list_for(ada)}
        assert entries["Reminder: stretch"].channel == "websocket"
        ws, _ = await _hello(http, rig)  # nothing more is waiting for the tab
        with pytest.raises(TimeoutError):
            await ws.receive_json(timeout=1.5)
        await ws.close()
