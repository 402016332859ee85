"""Approval requests as buttons and cards (docs/tools.md#approvals): when a tool call waits for its
person, kith itself posts the request (what will happen, in the tool's words) as a host notice. On
Telegram (the real adapter against the fake Bot API) it carries Approve and Deny buttons that only that
person can press; /approve and /deny typed still work. In the web chat the notice frame carries the
buttons for the card (gateway/web/static/chat/approvals.js), and pressing one sends the command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gateway.delivery.buttons import offered
from gateway.tools import request_text
from gateway.types import Reply
from tests.channels.rig import ADA_TG, start_rig, wait_for
from tests.conftest import GatewayFactory, WSClient
from tests.fakes.anthropic import API_KEY, FakeAnthropic
from tests.tools.outbox import Outbox


def test_only_the_hosts_request_offers_buttons() -> None:
    text = request_text("3fa9c1", "Send 'x' to bob.", 10)
    assert [(b.label, b.command) for b in offered(Reply(text=text, notice=True))] == [
        ("Approve", "/approve 3fa9c1"), ("Deny", "/deny 3fa9c1")]
    assert offered(Reply(text=text)) == (), "the model quoting it offers nothing"
    assert offered(Reply(text="Approve with /approve 3fa9c1 or /deny 000000", notice=True)) == ()


async def test_telegram_buttons_approve_and_a_stranger_changes_nothing(tmp_path: Path,
                                                                       fake_anthropic: FakeAnthropic) -> None:
    outbox = Outbox()
    llm = {"provider": "anthropic", "api_key": API_KEY, "base_url": fake_anthropic.base_url, "max_retries": 0}
    # tool_status off: only the request and the answers are sent, in order.
    rig = await start_rig(tmp_path, llm=llm, plugins=(outbox,), extra={"memory": {"recall_k": 0}},
                          telegram={"tool_status": False})
    try:
        fake_anthropic.enqueue_tool_use("send_note", {"to": "bob", "text": "lunch at 1?"})
        fake_anthropic.enqueue("I asked for your approval.")
        await rig.tg_say("send bob a note: lunch at 1?")
        asked, answered = await rig.tg.wait_sent(2)
        assert asked.text.startswith("Approval needed (expires in 10 min):\nSend 'lunch at 1?' to bob.")
        assert answered.text.startswith("I asked for your approval.")
        buttons = asked.buttons()
        assert list(buttons) == ["Approve", "Deny"]
        (result,) = fake_anthropic.tool_results()
        assert "was shown this request with Approve and Deny" in str(result["content"])

        await rig.tg.push(rig.tg.make_callback(user_id=ADA_TG + 1, message=asked, data=buttons["Approve"]))
        await wait_for(lambda: len(rig.tg.answered) == 1, what="the stranger's press answered")
        assert rig.tg.answered[0].get("text") == "This button is not for you." and outbox.sent == []

        await rig.tg.push(rig.tg.make_callback(user_id=ADA_TG, message=asked, data=buttons["Approve"]))
        done = (await rig.tg.wait_sent(3))[2]
        assert done.text == "sent to bob" and outbox.sent == [("bob", "lunch at 1?")]
        await rig.tg.push(rig.tg.make_callback(user_id=ADA_TG, message=asked, data=buttons["Deny"]))
        await wait_for(lambda: len(rig.tg.answered) == 3, what="the used message's other button answered")
        assert "expired" in rig.tg.answered[2].get("text", "") and len(outbox.sent) == 1

        # Typed, as before: /deny ID.
        fake_anthropic.enqueue_tool_use("send_note", {"to": "carol", "text": "hi"})
        fake_anthropic.enqueue("Asked.")
        await rig.tg_say("send carol hi")
        asked = (await rig.tg.wait_sent(5))[3]
        found = re.search(r"/deny ([0-9a-f]{6})", asked.text)
        assert found is not None
        await rig.tg_say(f"/deny {found.group(1)}")
        assert (await rig.tg.wait_sent(6))[5].text.startswith("Denied; nothing was done")
        assert len(outbox.sent) == 1
    finally:
        await rig.stop()


async def test_the_web_chat_gets_the_request_as_a_card(make_gateway: GatewayFactory, ws_connect: Any,
                                                       fake_anthropic: FakeAnthropic,
                                                       anthropic_llm: dict[str, Any]) -> None:
    outbox = Outbox()
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, plugins=(outbox,))
    client: WSClient = await ws_connect(gw)
    await client.hello("tab")
    fake_anthropic.enqueue_tool_use("send_note", {"to": "bob", "text": "lunch?"})
    fake_anthropic.enqueue("Waiting for you.")
    await client.ws.send_json({"type": "message", "id": "m1", "text": "send bob a note"})
    frames = []
    while not frames or frames[-1].get("id") != "m1" or frames[-1]["type"] != "reply":
        frames.append(await client.recv())
    (card,) = [f for f in frames if f["type"] == "reply" and f.get("buttons")]
    assert card["notice"] and card["proactive"] and "Send 'lunch?' to bob." in card["text"]
    approve = card["buttons"][0]
    assert approve["label"] == "Approve" and approve["command"].startswith("/approve ")
    assert outbox.sent == []
    frame, _ = await client.ask(approve["command"])  # what the card's button sends
    assert frame["text"] == "sent to bob" and outbox.sent == [("bob", "lunch?")]
