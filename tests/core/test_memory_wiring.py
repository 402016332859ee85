"""The gateway owns the memory service and the job bus: turns are logged, indexed through the bus and
recalled in later sessions; merges rebuild and purge; ``kith worker`` processes index through the bus."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.hookspecs import hookimpl
from gateway.memory.files.scopes import channel_scope, user_scope
from gateway.types import ConversationKind, InboundMessage
from tests.conftest import make_config
from tests.storage import select_one, select_rows


def dm(text: str, account: str = "alice", channel: str = "websocket", **kw: Any) -> InboundMessage:
    return InboundMessage(channel=channel, account_id=account, text=text, display_name=account.title(),
                          timestamp=datetime.now(UTC), trusted=True, **kw)


class Flushed:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def gateway_flush(self, gateway: Gateway) -> None:
        self.calls += 1


async def test_turns_are_indexed_through_the_bus_and_recalled_next_session(make_gateway: Any) -> None:
    flushed = Flushed()
    gw = await make_gateway(plugins=(flushed,))
    await gw.handle_inbound(dm("My sister Hanna lives in Tromsø and teaches chemistry."))
    await gw.settle()
    assert flushed.calls >= 2  # settle flushes until two quiet rounds
    user = select_one(gw.state, "SELECT user_id FROM turns LIMIT 1")[0]
    assert gw.memory.scope_count(user_scope(user)) > 0
    assert [q for q in await gw.bus.status() if q.name == "memory.index" and q.pending + q.in_flight == 0]

    hits = await gw.memory.recall(scope=user_scope(user), query="where does Hanna live?", k=3)
    assert hits and "Tromsø" in hits[0].text and hits[0].source.startswith("sessions/")


async def test_recall_section_reaches_the_prompt_in_a_new_session(make_gateway: Any, fake_anthropic: Any,
                                                                   anthropic_llm: dict[str, Any]) -> None:
    gw = await make_gateway(llm=anthropic_llm)
    await gw.handle_inbound(dm("Note for later: the boat is moored at pier 17."))
    await gw.settle()
    await gw.handle_inbound(dm("/new"))
    await gw.handle_inbound(dm("Which pier is the boat at?"))
    system = fake_anthropic.system_of(fake_anthropic.last_turn())
    assert "Recalled memories" in system and "pier 17" in system
    # Quoted as data with its date and source, never as instructions.
    recalled = system[system.index("Recalled memories"):]
    assert "sessions/" in recalled and str(datetime.now(UTC).year) in recalled


async def test_group_turns_live_in_the_group_and_never_leak_into_dms(make_gateway: Any) -> None:
    gw = await make_gateway()
    group = dict(conversation_id="team-room", kind=ConversationKind.GROUP, mentioned=True)
    await gw.handle_inbound(dm("The team offsite is in Lisbon this year.", **group))
    await gw.handle_inbound(dm("My private PIN hint is the blue whale."))
    await gw.settle()
    user = select_one(gw.state, "SELECT user_id FROM turns LIMIT 1")[0]
    room = channel_scope("websocket:team-room")
    assert gw.memory.scope_count(room) > 0
    dm_hits = await gw.memory.recall(scope=user_scope(user), query="where is the team offsite?", k=10)
    assert all("Lisbon" not in h.text for h in dm_hits)
    group_hits = await gw.memory.recall(scope=room, query="what is the PIN hint?", k=10)
    assert all("whale" not in h.text for h in group_hits)


async def test_merge_rebuilds_the_survivor_and_purges_the_merged_scope(make_gateway: Any) -> None:
    gw = await make_gateway()
    await gw.handle_inbound(dm("I keep bees on the roof.", account="a1"))
    await gw.handle_inbound(dm("My bike is a green Bianchi.", account="b2", channel="other"))
    await gw.settle()
    rows = {r[0]: r[1] for r in select_rows(gw.state, "SELECT account_id, user_id FROM identities")}
    into, source = rows["a1"], rows["b2"]
    assert gw.memory.scope_count(user_scope(source)) > 0
    await gw.merge_users(into=into, source=source)
    await gw.settle()
    assert gw.memory.scope_count(user_scope(source)) == 0
    hits = await gw.memory.recall(scope=user_scope(into), query="what bike do I ride?", k=3)
    assert any("Bianchi" in h.text for h in hits)


async def test_worker_process_without_the_index_indexes_through_the_daemon(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with Gateway(config, entry_points=False) as daemon:
        async with Gateway(config, entry_points=False, serve_http=False, supervise=False, mode="worker") as worker:
            assert worker.memory is not None and worker.memory.detached  # the daemon holds the index
            store = worker.memory_store("zoe")
            store.write("USER.md", "# Zoe\n\n## Work\n- Zoe repairs harpsichords in Ghent.\n", source="test")
            await worker.settle()
        await daemon.settle()
        hits = await daemon.memory.recall(scope=user_scope("zoe"), query="what does Zoe repair?", k=3)
        assert hits and "harpsichords" in hits[0].text


async def test_a_busy_day_continues_its_session_log_past_the_file_cap(make_gateway: Any) -> None:
    gw = await make_gateway(memory={"max_file_bytes": 4096})
    for i in range(40):
        await gw.handle_inbound(dm(f"Log line {i}: " + "the quick brown fox jumps over the lazy dog. " * 3))
        if i % 7 == 0:
            await gw.settle()
    await gw.handle_inbound(dm("The very last thing: my locker is number 3141."))
    await gw.settle()
    user = select_one(gw.state, "SELECT user_id FROM turns LIMIT 1")[0]
    store = gw.memory_store(user)
    logs = sorted(e.path for e in store.files("sessions"))
    assert len(logs) >= 3 and all((store.root / p).stat().st_size <= 4096 for p in logs)
    text = "".join(store.read(p) for p in logs)
    assert all(f"Log line {i}:" in text for i in range(40)) and "3141" in text
    hits = await gw.memory.recall(scope=user_scope(user), query="what is my locker number?", k=3)
    assert any("3141" in h.text for h in hits)
