"""Personas per person: /persona on a real gateway, remembered per conversation and per person, operator
defaults, sessions per persona, and which memory a person's personas share (docs/personas.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.personas import PersonaError
from gateway.personas.choice import available, choose, persona_for
from gateway.testing import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.persona.test_personas import dm, group, user_id
from tests.storage import select_rows


def turn_system(fake: FakeAnthropic) -> str:
    return fake.system_of(fake.last_turn())


async def _with_developer(make_gateway: GatewayFactory, **overrides: Any) -> Gateway:
    personas = {"default": "kith", "user_defaults": {}, **overrides.pop("personas", {})}
    gw = await make_gateway(personas=personas, **overrides)
    from gateway.personas import bootstrap, persona_store
    bootstrap(persona_store(gw, "developer"), "developer", template="developer")
    return gw


async def test_a_persona_switch_is_per_person_and_per_conversation(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    gw = await _with_developer(make_gateway, llm=anthropic_llm)
    await gw.handle_inbound(dm("hi", account="alice"))
    await gw.handle_inbound(dm("hi", account="bob"))
    listing = await gw.handle_inbound(dm("/persona", account="alice"))
    assert listing is not None and listing.notice
    assert "* kith" in listing.text and "- developer" in listing.text
    help_text = await gw.handle_inbound(dm("/help", account="alice"))
    assert help_text is not None and "/persona [NAME [default]]" in help_text.text
    assert "About Kith:" in help_text.text

    reply = await gw.handle_inbound(dm("/persona developer", account="alice"))
    assert reply is not None and "Now talking to developer" in reply.text
    await gw.handle_inbound(dm("how do I rebase?", account="alice"))
    assert "software-engineering assistant" in turn_system(fake_anthropic)
    help_text = await gw.handle_inbound(dm("/help", account="alice"))
    assert help_text is not None and "About Developer:" in help_text.text, "/help shows the chosen persona's HELP.md"
    await gw.handle_inbound(dm("and you?", account="bob"))
    assert "You are Kith" in turn_system(fake_anthropic), "A's /persona never changes B's"

    alice, bob = user_id(gw, "alice"), user_id(gw, "bob")
    assert persona_for(gw, alice, "websocket:alice") == "developer"
    assert persona_for(gw, bob, "websocket:bob") == "kith"
    # Remembered for that conversation only: Alice on Telegram still gets the default.
    assert persona_for(gw, alice, "telegram:999") == "kith"


async def test_switching_starts_a_new_session_and_switching_back_another(make_gateway: GatewayFactory) -> None:
    gw = await _with_developer(make_gateway)
    await gw.handle_inbound(dm("one"))
    await gw.handle_inbound(dm("/persona developer"))
    await gw.handle_inbound(dm("two"))
    await gw.handle_inbound(dm("/persona developer"))  # already: no new session
    await gw.handle_inbound(dm("three"))
    await gw.handle_inbound(dm("/persona kith"))
    await gw.handle_inbound(dm("four"))
    rows = select_rows(gw.state, "SELECT session_id, persona, ended_at FROM sessions ORDER BY started_at")
    assert [r["persona"] for r in rows] == ["kith", "developer", "kith"]
    assert [r["ended_at"] is None for r in rows] == [False, False, True]
    turns = select_rows(gw.state, "SELECT s.persona AS persona, t.content AS content FROM turns t JOIN sessions s"
                                  " ON s.session_id = t.session_id WHERE t.role = 'user' ORDER BY t.seq")
    assert [(t["persona"], t["content"]) for t in turns] == [
        ("kith", "one"), ("developer", "two"), ("developer", "three"), ("kith", "four")]


async def test_default_everywhere_and_operator_defaults(make_gateway: GatewayFactory) -> None:
    gw = await _with_developer(make_gateway, personas={"channels": {"telegram": "kith"}})
    await gw.handle_inbound(dm("hi"))
    alice = user_id(gw)
    reply = await gw.handle_inbound(dm("/persona developer default"))
    assert reply is not None and "your default everywhere" in reply.text
    assert persona_for(gw, alice, "telegram:alice") == "developer", "the person's default beats the channel's"
    # The operator's per-person default applies while the person has chosen nothing.
    gw2_cfg = gw.config.model_copy(deep=True)
    gw2_cfg.personas.user_defaults["someone"] = "developer"
    from gateway.personas.which import resolve_for
    assert resolve_for(gw.state, gw2_cfg, "someone", "websocket:x") == "developer"
    assert resolve_for(gw.state, gw2_cfg, "nobody", "websocket:x") == "kith"


async def test_operator_limits_which_personas_a_person_may_choose(make_gateway: GatewayFactory) -> None:
    gw = await _with_developer(make_gateway)
    await gw.handle_inbound(dm("hi"))
    alice = user_id(gw)
    gw.config.personas.user_personas[alice] = ["kith"]
    assert available(gw, alice) == ["kith"]
    reply = await gw.handle_inbound(dm("/persona developer"))
    assert reply is not None and "no persona 'developer' for you" in reply.text
    for bad in ("../etc", "Developer!", "nope"):
        try:
            choose(gw, alice, bad)
        except PersonaError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


async def test_a_group_keeps_the_operators_persona(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                                   anthropic_llm: dict[str, Any]) -> None:
    gw = await _with_developer(make_gateway, llm=anthropic_llm)
    reply = await gw.handle_inbound(group("/persona developer"))
    assert reply is not None and "operator chooses" in reply.text
    await gw.handle_inbound(group("hello all"))
    assert "You are Kith" in turn_system(fake_anthropic)


async def test_personas_share_the_persons_memory(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                                  anthropic_llm: dict[str, Any]) -> None:
    """The documented split: the person's files (profile, digests, reminders) are the same for every
    persona; the session (and so the live history) is per persona."""
    gw = await _with_developer(make_gateway, llm=anthropic_llm)
    await gw.handle_inbound(dm("my secret word is PERIWINKLE"))
    store = gw.memory_store(user_id(gw))
    store.write("USER.md", "# Alice\nLikes tea (USER-MARK).", source="test")
    store.write("MEMORY_SHORT.md", "Planned Lisbon (SHORT-MARK).", source="test")
    await gw.handle_inbound(dm("/persona developer"))
    await gw.handle_inbound(dm("what do you know?"))
    system = turn_system(fake_anthropic)
    assert "software-engineering assistant" in system
    assert "USER-MARK" in system and "SHORT-MARK" in system, "the profile and digests are the person's"
    messages = str(fake_anthropic.last_turn().get("messages"))
    assert "PERIWINKLE" not in messages, "the other persona's session history stays in its session"


def test_choices_survive_a_restart(tmp_path: Path, state_url: str | None) -> None:
    from gateway.state import open_configured
    state = open_configured(tmp_path, state_url)  # SQLite and PostgreSQL (tests/pg.py)
    from datetime import UTC, datetime
    state.persona_choices.choose("u1", "websocket:a", "developer", datetime.now(UTC))
    state.persona_choices.choose("u1", "", "kith", datetime.now(UTC))
    state.persona_choices.choose("u2", "websocket:a", "kith", datetime.now(UTC))
    state.close()
    state = open_configured(tmp_path, state_url)
    assert state.persona_choices.choices("u1") == {"": "kith", "websocket:a": "developer"}
    state.persona_choices.merge(into="u2", source="u1")
    assert state.persona_choices.choices("u2") == {"": "kith", "websocket:a": "kith"}, "the survivor's wins"
    assert state.persona_choices.choices("u1") == {}
    assert state.persona_choices.forget_user("u2") == 2
    state.close()


async def test_a_switch_off_the_record_stays_off_the_record(make_gateway: GatewayFactory) -> None:
    gw = await _with_developer(make_gateway)
    await gw.handle_inbound(dm("/otr on"))
    await gw.handle_inbound(dm("secret one"))
    reply = await gw.handle_inbound(dm("/persona developer"))
    assert reply is not None and "Now talking to developer" in reply.text
    status = await gw.handle_inbound(dm("/otr"))
    assert status is not None and "ON" in status.text
    await gw.handle_inbound(dm("secret two"))
    assert select_rows(gw.state, "SELECT content FROM turns") == [], "nothing Off-The-Record is stored"
    assert [o.session.persona for o in gw.sessions.otr.values()] == ["developer"]
