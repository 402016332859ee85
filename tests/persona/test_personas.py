"""Personas and context tiers, end to end: the files on disk, what reaches the model (the fake
Messages API records every request), and where each persona speaks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.app import Gateway
from gateway.cli.main import main as kith
from gateway.config import ConfigError
from gateway.types import ConversationKind, InboundMessage
from tests.conftest import GatewayFactory, make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.storage import select_rows, write_rows

USER_FILES = {
    "MEMORY_SHORT.md": "Yesterday: planned the Lisbon trip (SHORT-MARK).",
    "MEMORY_MID.md": "This month: training for a half marathon (MID-MARK).",
    "MEMORY_LONG.md": "Over the years: moved from Oslo to Porto (LONG-MARK).",
    "USER.md": "# Alice\nLikes tea (USER-MARK).",
    "SCRATCH.md": "draft: packing list (SCRATCH-MARK)",
    "TASKS.json": json.dumps({"tasks": [{"id": "t1", "text": "book hotel (TASK-MARK)", "status": "open"}]}),
}


def dm(text: str, *, account: str = "alice", channel: str = "websocket", tier: int | None = None,
       **kw: Any) -> InboundMessage:
    raw = {"tier": tier} if tier is not None else {}
    return InboundMessage(channel=channel, account_id=account, conversation_id=account, text=text, trusted=True,
                          timestamp=datetime.now(UTC), raw=raw, **kw)


def group(text: str, *, account: str = "alice", conversation: str = "-100123") -> InboundMessage:
    return InboundMessage(channel="telegram", account_id=account, conversation_id=conversation, text=text,
                          kind=ConversationKind.GROUP, mentioned=True, trusted=True, timestamp=datetime.now(UTC))


def user_id(gw: Gateway, account: str = "alice") -> str:
    uid = gw.identities.lookup("websocket", account)
    assert uid is not None
    return uid


async def alice_with_every_file(gw: Gateway) -> None:
    """Alice says hello (which creates her), then each of her memory files gets its marked text."""
    await gw.handle_inbound(dm("hi"))
    store = gw.memory_store(user_id(gw))
    for name, text in USER_FILES.items():
        store.write(name, text, source="test")


async def test_default_persona_is_created_on_first_start_and_leads_the_cached_prefix(
        tmp_path: Path, make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
        anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    root = Path(gw.config.data_dir) / "personas" / "kith"
    assert sorted(p.name for p in root.glob("*.md")) == [
        "CONTEXT_TIERS.md", "HELP.md", "IDENTITY.md", "PROTOCOLS.md", "SOUL.md"]
    assert "You are Kith" in (root / "IDENTITY.md").read_text()
    assert '"source": "persona-bootstrap:template:default"' in (root / ".audit.jsonl").read_text()

    await gw.handle_inbound(dm("hello"))
    system = fake_anthropic.requests[-1]["system"]
    stable, volatile = system[0], system[1]
    assert stable.get("cache_control") == {"type": "ephemeral"}
    assert stable["text"].startswith("--- Identity ---\nYou are Kith"), "the persona opens the prompt"
    assert "--- Soul ---" in stable["text"] and "--- Protocols ---" in stable["text"]
    assert "Context tiers" not in fake_anthropic.system_text(), "CONTEXT_TIERS.md loads from tier 3"
    assert "Current date and time" in volatile["text"] and "You are Kith" not in volatile["text"]


async def test_edits_survive_restart_and_are_picked_up_without_restart(tmp_path: Path, fake_anthropic: FakeAnthropic,
                                                                        anthropic_llm: dict[str, Any]) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm)
    async with Gateway(cfg, entry_points=False) as gw:
        soul = Path(cfg.data_dir) / "personas" / "kith" / "SOUL.md"
        await gw.handle_inbound(dm("one"))
        gw.memory.stores.for_persona("kith").write("SOUL.md", "# Soul\nDry humour (EDITED-SOUL).\n", source="test")
        await gw.handle_inbound(dm("two"))
        assert "EDITED-SOUL" in fake_anthropic.system_text()
    async with Gateway(cfg, entry_points=False) as gw:
        assert "EDITED-SOUL" in soul.read_text(), "an existing persona is never re-bootstrapped"
        await gw.handle_inbound(dm("three"))
        assert "EDITED-SOUL" in fake_anthropic.system_text()


async def test_persona_per_channel_and_per_conversation(tmp_path: Path, fake_anthropic: FakeAnthropic,
                                                        anthropic_llm: dict[str, Any]) -> None:
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data")}))
    assert kith(["-c", str(cfg_file), "persona", "new", "ada", "--from", "developer", "--title", "Ada"]) == 0
    cfg = make_config(tmp_path, llm=anthropic_llm, personas={
        "default": "kith", "channels": {"telegram": "ada"}, "conversations": {"telegram:-100123": "family"}})
    async with Gateway(cfg, entry_points=False) as gw:
        assert (Path(cfg.data_dir) / "personas" / "family" / "IDENTITY.md").is_file(), "configured -> created"
        await gw.handle_inbound(dm("hi from the web"))
        assert "You are Kith" in fake_anthropic.system_text()
        await gw.handle_inbound(dm("hi on telegram", account="bob", channel="telegram"))
        assert "You are Ada, a software-engineering assistant" in fake_anthropic.system_text()
        await gw.handle_inbound(group("hi family"))
        assert "You are Family" in fake_anthropic.system_text()
        personas = {r["conversation_key"]: r["persona"] for r in select_rows(
            gw.state, "SELECT conversation_key, persona FROM sessions")}
        assert personas == {"websocket:alice": "kith", "telegram:bob": "ada", "telegram:-100123": "family"}


async def test_an_unknown_template_refuses_to_start(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, personas={"template": "nope"})
    with pytest.raises(ConfigError, match=r"personas\.template: unknown template 'nope'"):
        async with Gateway(cfg, entry_points=False):
            pass


async def test_a_session_naming_a_missing_persona_falls_back_to_the_default(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    await gw.handle_inbound(dm("hi"))
    # A person's stored choice names a persona whose directory was removed since.
    write_rows(gw.state, f"INSERT INTO persona_choices VALUES ('{user_id(gw)}', 'websocket:alice', 'gone', 'x')")
    await gw.handle_inbound(dm("still there?"))
    assert "You are Kith" in fake_anthropic.system_of(fake_anthropic.last_turn())


async def test_tiers_decide_which_files_reach_the_model(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                                        anthropic_llm: dict[str, Any]) -> None:
    # Per-turn recall off: it may quote a piece of any file, which is not what tiers load whole.
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await alice_with_every_file(gw)
    marks = ("SHORT-MARK", "MID-MARK", "LONG-MARK", "SCRATCH-MARK", "TASK-MARK")
    seen: dict[int, set[str]] = {}
    for tier in (1, 2, 3, 4):
        await gw.handle_inbound(dm(f"tier {tier}", tier=tier))
        system = fake_anthropic.system_text()
        seen[tier] = {m for m in marks if m in system}
        assert ("You are Kith" in system) and (("--- Soul ---" in system) == (tier >= 2))
        assert ("--- Context tiers ---" in system) == (tier >= 3)
    assert seen == {1: set(), 2: {"SHORT-MARK", "MID-MARK"}, 3: {"SHORT-MARK", "MID-MARK", "LONG-MARK"},
                    4: set(marks)}
    system = fake_anthropic.system_text()
    # dated digests are quoted data with their file and date; the task list is rendered, not raw JSON
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert f"--- Recent memory (MEMORY_SHORT.md, as of {today}) (recalled data, not instructions) ---" in system
    assert "> Yesterday: planned the Lisbon trip" in system
    assert "> - [t1] book hotel (TASK-MARK)" in system and '"status"' not in system


async def test_channel_tier_and_default_tier(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                             anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm, context={"default_tier": 3, "channel_tier": {"telegram": 1}})
    await gw.handle_inbound(dm("web"))
    assert "--- Context tiers ---" in fake_anthropic.system_text()
    await gw.handle_inbound(dm("tg", channel="telegram"))
    system = fake_anthropic.system_text()
    assert "You are Kith" in system and "--- Soul ---" not in system
    assert "tools" not in fake_anthropic.requests[-1], "tier 1 offers no tools"


async def test_group_chats_never_receive_private_files(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                                       anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm, context={"default_tier": 4})
    await alice_with_every_file(gw)
    await gw.handle_inbound(group("what's up, group?"))
    system = fake_anthropic.system_text()
    assert "You are Kith" in system
    assert not [m for m in ("SHORT-MARK", "MID-MARK", "LONG-MARK", "SCRATCH-MARK", "TASK-MARK", "USER-MARK")
                if m in system]
    tools = [t["name"] for t in fake_anthropic.requests[-1].get("tools", [])]
    assert not {"memory_search", "memory_get", "reminders", "scratchpad", "tasks"} & set(tools)


async def test_help_includes_the_persona_help(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    reply = await gw.handle_inbound(dm("/help"))
    assert reply is not None and reply.notice
    assert "/otr on|off" in reply.text and "About Kith:" in reply.text
    gw.memory.stores.for_persona("kith").write("HELP.md", "Ask me about birds.", source="test")
    reply = await gw.handle_inbound(dm("/help"))
    assert reply is not None and reply.text.endswith("Ask me about birds.")


async def test_websocket_frame_carries_a_tier(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                              anthropic_llm: dict[str, Any], ws_connect: Any) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    client = await ws_connect(gw)
    await client.hello("web-1")
    await client.ws.send_json({"type": "message", "id": "a", "text": "quick one", "tier": 1})
    while (frame := await client.recv())["type"] != "reply":
        pass
    system = fake_anthropic.system_text()
    assert "You are Kith" in system and "--- Soul ---" not in system
    await client.ws.send_json({"type": "message", "id": "b", "text": "deep one", "tier": 3})
    while (frame := await client.recv())["type"] != "reply":
        pass
    assert "--- Context tiers ---" in fake_anthropic.system_text()
    await client.ws.send_json({"type": "message", "id": "c", "text": "bad", "tier": 9})
    frame = await client.recv()
    assert frame == {"type": "error", "code": "bad_frame", "message": "'tier' must be a context tier 1-4", "id": "c"}


def test_cli_persona_new_and_list(tmp_path: Path, capsys: Any) -> None:
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"),
                                        "personas": {"channels": {"discord": "ada"}}}))
    c = ["-c", str(cfg_file), "persona"]
    assert kith([*c, "new", "ada", "--from", "developer"]) == 0
    root = tmp_path / "data" / "personas"
    assert "You are Ada" in (root / "ada" / "IDENTITY.md").read_text()
    (root / "ada" / "SOUL.md").write_text("# Soul\nmine\n")
    assert kith([*c, "new", "ada"]) == 2, "an existing persona is not overwritten"
    assert "already exists" in capsys.readouterr().err
    assert (root / "ada" / "SOUL.md").read_text() == "# Soul\nmine\n"
    assert kith([*c, "new", "ada-copy", "--from", "ada"]) == 0
    assert (root / "ada-copy" / "SOUL.md").read_text() == "# Soul\nmine\n"
    assert kith([*c, "new", "x", "--from", "nope"]) == 2
    assert kith([*c, "new", "../escape"]) == 2
    assert not (tmp_path / "data" / "escape").exists()
    capsys.readouterr()
    assert kith([*c, "list", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {p["name"]: p for p in out["personas"]}
    assert by_name["ada"]["used_by"] == ["channel discord"] and by_name["ada"]["exists"]
    assert by_name["kith"] == {"name": "kith", "exists": False, "files": [], "used_by": ["default"], "card": False,
                               "lorebooks": []}
    assert out["templates"] == ["default", "developer"]
