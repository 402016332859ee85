"""Briefings: assembled from the person's tasks, reminders, working memory, dated facts and plugin
sections; recorded on the ``briefing`` channel where the sleep cycle counts it as automated."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from gateway.app import Gateway
from gateway.delivery.sections import BriefingSection
from gateway.hookspecs import hookimpl
from gateway.memory.background.daybook import gather, read_turns
from gateway.memory.files import working
from gateway.state.records import NewFact
from gateway.testing import GatewayFactory, message
from plugins.briefing import deliver_briefing, run_briefing


class Weather:
    @hookimpl
    def gateway_briefing_sections(self, gateway: Gateway, user_id: str, now: datetime) -> list[BriefingSection]:
        return [BriefingSection(source="weather", title="Weather", text=f"Sunny for {user_id[:1]}", order=5)]


class Broken:
    @hookimpl
    def gateway_briefing_sections(self, gateway: Gateway, user_id: str, now: datetime) -> BriefingSection:
        raise RuntimeError("calendar down")


async def _person(gw: Gateway) -> str:
    await gw.handle_inbound(message("hello", account="alice"))
    uid = gw.identities.lookup("websocket", "alice")
    assert uid is not None
    return uid


async def test_briefing_has_every_section_and_is_recorded_on_the_briefing_channel(
        kith_gateway: GatewayFactory) -> None:  # fmt: skip
    gw = await kith_gateway(plugins=(Weather(), Broken()))
    uid = await _person(gw)
    now = datetime.now(UTC)
    store = gw.memory_store(uid)
    today = now.date().isoformat()
    store.write("TASKS.json", json.dumps({"tasks": [
        {"id": "t1", "text": "file taxes", "status": "open", "due": today},
        {"id": "t2", "text": "old chore", "status": "open", "due": (now - timedelta(days=3)).date().isoformat()},
        {"id": "t3", "text": "later thing", "status": "open", "due": (now + timedelta(days=30)).date().isoformat()},
        {"id": "t4", "text": "finished", "status": "done", "due": today}]}), source="test")
    soon = (now + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    store.write("REMINDERS.md", "# Reminders\n\n- [ ] soon (UTC) water plants "
                f"<!-- reminder id=r1 due={soon} -->\n", source="test")
    working.write(store, "We were planning the trip to Lisbon.", now=now, ttl_days=2, source="test")
    birthday = (now + timedelta(days=3)).date().replace(year=1990)
    gw.state.knowledge.insert(NewFact(user_id=uid, subject="Sam", subject_key="sam", predicate="birthday",
                                      object=birthday.isoformat(), object_key=birthday.isoformat(),
                                      valid_from=now - timedelta(days=1), valid_until=None, confidence=1.0,
                                      source_type="test", source_ref="", replay_key=None,
                                      created_at=now))  # fmt: skip
    text = await run_briefing(gw, uid)
    for expected in ("file taxes", "old chore (overdue)", "water plants", "trip to Lisbon", "Sam birthday",
                     "**Weather**\nSunny for", "**Tasks due**", "**Coming up**"):
        assert expected in text, (expected, text)
    assert "later thing" not in text and "finished" not in text
    assert text.index("Weather") < text.index("Tasks due") < text.index("Today's reminders")

    rows = read_turns(gw.state, scope_key=f"user:{uid}", after_seq=0, before=datetime.now(UTC) + timedelta(1))
    briefing = [r for r in rows if r.channel == "briefing"]
    assert [r.role for r in briefing] == ["user", "assistant"] and briefing[1].content == text
    book = gather(rows, budget=100_000, interactive_share=0.7, head_share=0.5,
                  automated_channels=gw.config.background.sleep.automated_channels, tz=UTC)  # fmt: skip
    automated = book.text.split("## Automated conversations", 1)
    assert len(automated) == 2 and "### briefing conversation" in automated[1]
    assert "### briefing conversation" not in automated[0]


async def test_an_empty_briefing_says_so_and_delivery_is_once(kith_gateway: GatewayFactory) -> None:
    gw = await kith_gateway()
    uid = await _person(gw)
    await deliver_briefing(gw, uid, delivery_id="brief-1")
    await deliver_briefing(gw, uid, delivery_id="brief-1")  # a retried job: assembled and recorded once
    entry = gw.state.outbox.get("brief-1")
    assert entry is not None and entry.kind == "briefing" and "Nothing due today" in entry.text
    rows = read_turns(gw.state, scope_key=f"user:{uid}", after_seq=0, before=datetime.now(UTC) + timedelta(1))
    assert len([r for r in rows if r.channel == "briefing"]) == 2
