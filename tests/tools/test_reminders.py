"""Reminders: the tool writes REMINDERS.md and enqueues a delayed job on the real bus; the job sends
the reminder to the conversation it was set in (a proactive WebSocket frame) and marks it sent.
A cancelled reminder is never delivered."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from plugins.tools.reminders import parse_reminders, render_reminders
from tests.conftest import GatewayFactory, WSClient
from tests.fakes.anthropic import FakeAnthropic


def reminders_file(gw: Gateway) -> Path:
    uid = gw.identities.lookup("websocket", "phone")
    assert uid is not None
    return Path(gw.config.data_dir) / "users" / uid / "REMINDERS.md"


async def proactive(client: WSClient, timeout: float) -> dict[str, Any] | None:
    try:
        async with asyncio.timeout(timeout):
            while True:
                frame = await client.recv(timeout=timeout)
                if frame.get("proactive"):
                    return frame
    except TimeoutError:
        return None


async def test_reminder_is_delivered_when_due_and_a_cancelled_one_is_not(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],
        ws_connect: Any) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    client: WSClient = await ws_connect(gw)
    await client.hello("phone")

    fake_anthropic.enqueue_tool_use("reminders", {"action": "add", "text": "stretch your legs", "in_minutes": 0.03})
    fake_anthropic.enqueue("I'll remind you.")
    frame, _ = await client.ask("remind me to stretch in two seconds")
    assert frame["text"] == "I'll remind you."
    (result,) = fake_anthropic.tool_results()
    rid = re.search(r"Reminder (r[0-9a-f]+) set for", result["content"])
    assert rid, result

    fake_anthropic.enqueue_tool_use("reminders", {"action": "add", "text": "call Sam", "in_minutes": 0.05})
    fake_anthropic.enqueue("ok")
    await client.ask("and to call Sam")
    other = re.search(r"Reminder (r[0-9a-f]+)", fake_anthropic.tool_results()[0]["content"])
    assert other
    fake_anthropic.enqueue_tool_use("reminders", {"action": "cancel", "id": other[1]})
    fake_anthropic.enqueue("cancelled")
    await client.ask("never mind Sam")
    assert fake_anthropic.tool_results()[0]["content"] == f"Reminder {other[1]} cancelled."

    # the pending reminder is in the next prompt (tier 2), with the id the model can cancel it by
    await client.ask("anything pending?")
    system = fake_anthropic.system_text()
    assert f"> - {rid[1]}: " in system and "stretch your legs" in system and "call Sam" not in system

    got = await proactive(client, timeout=15)
    assert got is not None and got["text"] == "Reminder: stretch your legs" and got["id"] is None
    assert await proactive(client, timeout=4) is None, "the cancelled reminder never arrives"

    reminders = {r.id: r for r in parse_reminders(reminders_file(gw).read_text())}
    assert reminders[rid[1]].status == "sent" and reminders[other[1]].status == "cancelled"
    assert "sent=" in reminders_file(gw).read_text()
    # the job payload carried ids only: the text lives in REMINDERS.md
    dead = await gw.bus.dead()
    assert not dead


async def test_reminder_times_are_the_persons_local_time(make_gateway: GatewayFactory,
                                                         fake_anthropic: FakeAnthropic,
                                                         anthropic_llm: dict[str, Any], ws_connect: Any) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    client: WSClient = await ws_connect(gw)
    await client.hello("phone")
    fake_anthropic.enqueue_tool_use("reminders", {"action": "add", "text": "dentist", "at": "2999-01-02T09:30"})
    fake_anthropic.enqueue("ok")
    await client.ask("dentist")
    content = fake_anthropic.tool_results()[0]["content"]
    assert "2999-01-02 09:30 (UTC)" in content
    fake_anthropic.enqueue_tool_use("reminders", {"action": "add", "text": "past", "at": "2001-01-01T09:00"})
    fake_anthropic.enqueue("ok")
    await client.ask("past")
    res = fake_anthropic.tool_results()[0]
    assert res["is_error"] and "in the past" in res["content"]
    text = reminders_file(gw).read_text()
    assert text.startswith("# Reminders\n") and "past" not in text
    assert render_reminders(text).startswith("- r") and "dentist" in render_reminders(text)
