"""The reminders and tasks tools through a real turn (fake Anthropic) and the real bus: 'preview' says
back how a repetition was understood and writes nothing; 'add' writes the line and arms one delayed
job; a task with a due date is armed too."""

from __future__ import annotations

import json
from typing import Any

from gateway.app import Gateway
from gateway.schedule.items import REMINDERS, TASKS
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.tools.test_memory_tools import call


async def delayed(gw: Gateway) -> int:
    assert gw.bus is not None
    return sum(q.delayed for q in await gw.bus.status() if q.name == "schedule_due")


async def test_recurring_reminder_preview_then_add(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                                   anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.settle()
    args = {"action": "preview", "repeat": "every weekday at 8", "text": "stand-up"}
    result = await call(gw, fake_anthropic, "reminders", args)
    assert result["content"].startswith("Understood as: every weekday at 08:00 (UTC), first on ")
    assert "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=0" in result["content"]
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None and not gw.memory_store(uid).exists(REMINDERS)
    result = await call(gw, fake_anthropic, "reminders", {**args, "action": "add"})
    assert result["content"].startswith("Reminder r") and "every weekday at 08:00" in result["content"]
    line = gw.memory_store(uid).read(REMINDERS).splitlines()[-1]
    assert line.startswith("- [ ] every weekday at 08:00 (UTC) stand-up <!-- reminder id=r")
    assert 'rule="rrule:FREQ=WEEKLY' in line and "to=websocket:alice" in line
    assert await delayed(gw) == 1
    bad = await call(gw, fake_anthropic, "reminders", {"action": "add", "repeat": "now and then", "text": "x"})
    assert bad["is_error"] and "could not tell how often" in bad["content"]


async def test_a_task_with_a_due_date_is_armed(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                              anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.settle()
    result = await call(gw, fake_anthropic, "tasks", {"action": "add", "text": "file taxes", "due": "2999-04-15"})
    assert result["content"] == "Added task t1; I will remind them Monday 2999-04-15 09:00 (UTC)."
    assert await delayed(gw) == 1
    bad = await call(gw, fake_anthropic, "tasks", {"action": "add", "text": "x", "due": "next Tuesday"})
    assert bad["is_error"] and "'due' must be a date" in bad["content"]
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    assert [t["text"] for t in json.loads(gw.memory_store(uid).read(TASKS))["tasks"]] == ["file taxes"]


async def test_a_scheduled_prompt_through_the_reminders_tool(make_gateway: GatewayFactory,
                                                             fake_anthropic: FakeAnthropic,
                                                             anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.settle()
    args = {"action": "preview", "repeat": "on Sunday evenings", "prompt": "ask me about my week"}
    result = await call(gw, fake_anthropic, "reminders", args)
    assert "every Sunday at 18:00 (UTC)" in result["content"] and "ask me about my week" in result["content"]
    result = await call(gw, fake_anthropic, "reminders", {**args, "action": "add"})
    cid = result["content"].split()[2]
    assert result["content"].startswith("Scheduled prompt c") and cid.startswith("c")
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    (entry,) = json.loads(gw.memory_store(uid).read("CRONS.json"))["crons"]
    assert entry["prompt"] == "ask me about my week" and "BYDAY=SU;BYHOUR=18" in entry["rule"]
    assert await delayed(gw) == 1
    listed = (await call(gw, fake_anthropic, "reminders", {"action": "list"}))["content"]
    assert f"- {cid}: every Sunday at 18:00 (UTC) run the prompt: ask me about my week" in listed
    assert (await call(gw, fake_anthropic, "reminders", {"action": "cancel", "id": cid}))["content"] == \
        f"Scheduled prompt {cid} cancelled."
    assert json.loads(gw.memory_store(uid).read("CRONS.json"))["crons"][0]["enabled"] is False
