"""Acceptance 2: two turns over the WebSocket against the fake Anthropic API, restart, same user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.app import Gateway
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.storage import select_one


async def test_two_turns_restart_same_user_and_history(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], ws_connect: Any
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm)
    async with Gateway(cfg, entry_points=False) as gw:
        client = await ws_connect(gw)
        ready = await client.hello("laptop-1", "Alice")
        assert ready["type"] == "ready" and ready["model_ready"] is True
        user_id = ready["user_id"]
        fake_anthropic.enqueue("Nice to meet you, Alice. Noted: you like sailing.")
        reply, deltas = await client.ask("Hi, I'm Alice and I like sailing.")
        assert reply["type"] == "reply" and reply["text"] == "Nice to meet you, Alice. Noted: you like sailing."
        assert len(deltas) > 1 and "".join(deltas) == reply["text"], "reply must be streamed in pieces"
        session_id = reply["session_id"]
        reply2, _ = await client.ask("What do I like?")
        assert reply2["session_id"] == session_id
        # The second request carries the first exchange as history.
        second = fake_anthropic.requests[-1]
        assert second["stream"] is True
        assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
        assert "sailing" in second["messages"][0]["content"]
        # Stable blocks carry a cache breakpoint only when there are stable sections; the date block is there.
        assert "Current date and time" in fake_anthropic.system_text()

    log_files = list((tmp_path / "data" / "users" / user_id / "sessions").glob("*.md"))
    assert log_files and "I like sailing" in log_files[0].read_text()

    async with Gateway(cfg, entry_points=False) as gw2:
        client = await ws_connect(gw2)
        ready = await client.hello("laptop-1", "Alice")
        assert ready["user_id"] == user_id
        count = select_one(gw2.state, "SELECT COUNT(*) AS n FROM turns WHERE user_id=?", user_id)
        assert count is not None and count["n"] == 4
        reply3, _ = await client.ask("Still there?")
        assert reply3["session_id"] == session_id
        third = fake_anthropic.requests[-1]
        assert len(third["messages"]) == 5 and "sailing" in third["messages"][0]["content"]


async def test_model_errors_become_a_notice_not_a_crash(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], ws_connect: Any, make_gateway: Any
) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    client = await ws_connect(gw)
    await client.hello("c1")
    fake_anthropic.enqueue(status=529, error_type="overloaded_error")
    reply, _ = await client.ask("hello?")
    assert reply["type"] == "reply" and reply["notice"] is True
    assert "unavailable" in reply["text"]
    reply, _ = await client.ask("and now?")
    assert reply["notice"] is False and reply["text"].startswith("fake-claude heard")


async def test_no_api_key_starts_and_explains(tmp_path: Path, make_gateway: Any, ws_connect: Any) -> None:
    gw = await make_gateway(llm={"provider": "anthropic"})
    assert gw.model_ready is False
    client = await ws_connect(gw)
    ready = await client.hello("c1")
    assert ready["model_ready"] is False and "ANTHROPIC_API_KEY" in ready["notice"]
    reply, _ = await client.ask("hello")
    assert reply["notice"] is True and "ANTHROPIC_API_KEY" in reply["text"]


async def test_prompt_caching_breakpoint_on_stable_block(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any], make_gateway: Any
) -> None:
    from gateway.hookspecs import hookimpl
    from gateway.types import ContextSection, InboundMessage, Stability

    class Persona:
        @hookimpl
        def gateway_context_sections(self) -> list[ContextSection]:
            return [ContextSection(source="persona", title="Identity", text="You are Kit.", priority=100,
                                   stability=Stability.STABLE, protected=True)]

    gw = await make_gateway(llm=anthropic_llm, plugins=(Persona(),))
    await gw.handle_inbound(InboundMessage(channel="websocket", account_id="a", text="hi", trusted=True))
    system = fake_anthropic.requests[-1]["system"]
    assert system[0]["cache_control"] == {"type": "ephemeral"} and "You are Kit." in system[0]["text"]
    assert "cache_control" not in system[1] and "Current date and time" in system[1]["text"]
