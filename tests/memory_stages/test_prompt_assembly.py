"""Issue 5 acceptance 3-5 and the people lookup: what reaches the prompt, and what never does."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.hookspecs import hookimpl
from gateway.turn.protocol import ASSEMBLED
from gateway.types import LLMRequest, Turn
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg
from tests.storage import select_one

LINKS = [{"user": "ada", "accounts": ["websocket:ada", "telegram:ada", "discord:ada"]}]
PROFILE = "# Ada\n\n## Basics\n- Ada Lovelace, lives in London.\n- Prefers short answers.\n"


class Capture:
    """Keeps what the budgeter did with each turn's sections."""

    def __init__(self) -> None:
        self.assembled: list[Any] = []

    @hookimpl
    def gateway_before_llm_call(self, gateway: Gateway, turn: Turn, request: LLMRequest) -> None:
        self.assembled.append(turn.stash[ASSEMBLED])


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.parts[len(root.parts)] not in ("qdrant", "redis")
            and not p.name.endswith(("-wal", "-shm"))}


async def test_otr_reads_memory_but_writes_nothing(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=LINKS,
                      sessions={"compact_after_tokens": 50, "compact_keep_turns": 1})
    async with Gateway(cfg, entry_points=False) as gw:
        await gw.handle_inbound(msg("My favourite tea is lapsang souchong."))
        await gw.settle()
        gw.memory_store("ada").write("USER.md", PROFILE, source="test")
        await gw.settle()
        before = snapshot(gw.data_dir), gw.memory.scope_count("user:ada")
        await gw.handle_inbound(msg("/otr on"))
        for i in range(6):  # long enough to trigger compaction and the memory writer if they ran
            await gw.handle_inbound(msg(f"Off the record {i}: which tea do I like? " + "filler " * 60))
        system = last_turn_system(fake_anthropic)
        assert "Ada Lovelace" in system and "lapsang souchong" in system  # memory is read
        await gw.settle()
        assert (snapshot(gw.data_dir), gw.memory.scope_count("user:ada")) == before  # nothing written
        assert select_one(gw.state, "SELECT COUNT(*) AS n FROM compactions")["n"] == 0


async def test_group_chat_never_receives_the_users_profile(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=LINKS)
    async with Gateway(cfg, entry_points=False) as gw:
        store = gw.memory_store("ada")
        store.write("USER.md", PROFILE + "- Secret: allergic to penicillin.\n", source="test")
        store.write("people/websocket-ada.md", "# Ada\n- private note: penicillin allergy\n", source="test")
        await gw.handle_inbound(msg("I am allergic to penicillin, remember that."))
        gw.memory.stores.for_channel("websocket:book-club").write(
            "CHANNEL.md", "# Book club\n- Meets on Thursdays.\n", source="test")
        await gw.settle()
        await gw.handle_inbound(msg("What do you know about me and this club? penicillin?", group="book-club"))
        system = last_turn_system(fake_anthropic)
        assert "Meets on Thursdays" in system  # the group's own memory
        assert "penicillin" not in system.replace("penicillin?", "")  # nothing private: profile, notes, recall
        assert "Ada Lovelace" not in system


async def test_budget_overflow_trims_recalled_then_facts_then_dated_then_playbooks_never_the_profile(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    capture = Capture()
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=LINKS, context={"budget_tokens": 900})
    async with Gateway(cfg, plugins=(capture,), entry_points=False) as gw:
        store = gw.memory_store("ada")
        # A real playbook (the playbook stage reads playbooks/ and recalls it for the sailing message).
        store.write("playbooks/sailing.md", "# Sailing near Cowes\n" + "Check the tide tables, then reef early. " * 60,
                    source="test")
        store.write("USER.md", PROFILE + "".join(f"- Detail {i}: likes topic {i}.\n" for i in range(40)),
                    source="test")
        store.write("MEMORY_SHORT.md", "# Recent days\n" + "Ada went sailing near Cowes. " * 120, source="test")
        for i in range(30):
            gw.kg.add("ada", "Ada", "likes", f"sailing boat model {i}")
        for i in range(12):
            await gw.handle_inbound(msg(f"Sailing log {i}: the boat handled the gusts near Cowes well."))
        await gw.handle_inbound(msg("/new"))
        await gw.settle()
        await gw.handle_inbound(msg("Tell me about sailing and the boat near Cowes."))
        assembled = capture.assembled[-1]
        kinds = {"memory.recall": "recalled", "facts": "facts", "memory.playbooks": "playbooks"}
        order = [kinds.get(t.source, "dated" if "MEMORY_SHORT" in t.source else t.source)
                 for t in assembled.trims if t.reason == "total budget"]
        assert order[:4] == ["recalled", "facts", "dated", "playbooks"], assembled.trims
        assert assembled.total_tokens <= 900 or all(s.protected for s in assembled.sections if s.trim_rank < 50)
        system = last_turn_system(fake_anthropic)
        assert "Detail 39: likes topic 39." in system  # the whole profile survived
        assert not any(t.source == "memory.profile" for t in assembled.trims)


async def test_per_channel_scope_keeps_channels_apart(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, identity={"channel_scope": {"discord": "channel"}})
    async with Gateway(cfg, entry_points=False) as gw:
        await gw.handle_inbound(msg("My locker code is 8812.", account="ada", channel="telegram"))
        await gw.settle()
        await gw.handle_inbound(msg("What is my locker code?", account="ada", channel="discord"))
        assert "8812" not in json.dumps(fake_anthropic.last_turn())
        await gw.handle_inbound(msg("What is my locker code?", account="ada", channel="telegram"))
        assert "8812" in json.dumps(fake_anthropic.last_turn())


async def test_people_lookup_loads_speaker_participants_and_mentions_in_order(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, memory={"people_file_tokens": 60})
    async with Gateway(cfg, entry_points=False) as gw:
        room = gw.memory.stores.for_channel("websocket:band")
        for slug, note in (("websocket-ada", "Ada plays bass."), ("websocket-bo", "Bo plays drums."),
                           ("websocket-cy", "Cy writes the lyrics."), ("telegram-77", "Dee books the gigs.")):
            room.write(f"people/{slug}.md", f"# {slug}\n- {note}\n", source="test")
        room.write("people/_aliases.json", json.dumps({"dee": "telegram-77", "dee dee": "telegram-77"}),
                   source="test")
        await gw.handle_inbound(msg("hi all", account="bo", group="band"))
        await gw.handle_inbound(msg("hello", account="cy", group="band"))
        await gw.handle_inbound(msg("Did Dee's booking work out?", account="ada", group="band"))
        system = last_turn_system(fake_anthropic)
        people = system[system.index("People in this conversation"):]
        people = people.split("\n--- ")[0]
        positions = [people.index(n) for n in ("Ada plays bass", "Cy writes", "Bo plays drums", "Dee books")]
        assert positions == sorted(positions)  # speaker, recent participants (newest first), mentions
