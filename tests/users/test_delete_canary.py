"""``kith users delete``: after a real conversation with a canary, no file of the data dir holds it.

The grep reads every file under the data dir, raw: the SQLite database and its WAL, the Qdrant
shard (segments and write-ahead log), the job bus's append-only file, the memory trees and the log
files. Bob, who talked too, keeps everything.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.memory.files.scopes import user_scope
from gateway.testing import message
from plugins.profile import _snapshots
from tests.users.support import config_of, converse, files_with, kith, started, write_config


def _canary() -> str:
    return "KITHCANARY" + uuid.uuid4().hex[:12].upper()


def test_offline_delete_leaves_no_trace_of_the_person(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = write_config(tmp_path)
    config = config_of(cfg_path)
    data = Path(config.data_dir)
    canary = _canary()

    async def before() -> tuple[str, str]:
        gw = await started(config)
        try:
            return await converse(gw, canary)
        finally:
            await gw.close()

    alice, bob = asyncio.run(before())
    assert files_with(data, canary), "the conversation must have stored the canary somewhere"
    assert any("qdrant" in f for f in files_with(data, canary)), "and in the index"

    assert kith(cfg_path, "users", "delete", "websocket:alice", "--yes") == 0
    out = capsys.readouterr().out
    assert f"erased {alice}" in out

    assert files_with(data, canary) == []
    assert files_with(data, alice) == []  # her id: rows, jobs, cron slots, log lines
    log = (data / "logs" / "kith.log").read_text()
    assert "bob's turn ok" in log and "alice" not in log

    async def after() -> None:
        gw = await started(config)
        try:
            assert gw.state.users.get(alice) is None
            assert gw.identities.lookup("websocket", "alice") is None
            assert not gw.state.access.is_approved("websocket", "alice")
            assert gw.state.knowledge.all(alice) == []
            assert [f.object for f in gw.state.knowledge.all(bob)] == ["gardening"]
            assert gw.memory is not None
            assert gw.memory.scope_count(user_scope(alice)) == 0
            hits = await gw.memory.recall(scope=user_scope(bob), query="garden meeting thursday", k=3)
            assert hits and "garden meeting" in hits[0].text
            assert canary not in str(await gw.bus.dead(1000))
            assert gw.bus is not None
            assert await gw.bus.redis.exists(gw.bus.keys.job(f"later:{bob}"))  # only her jobs went
            assert not await gw.bus.redis.exists(gw.bus.keys.job(f"later:{alice}"))
        finally:
            await gw.close()

    asyncio.run(after())
    assert files_with(data, canary) == []  # a second start wrote nothing of hers back


async def test_delete_through_the_running_daemon(tmp_path: Path, unused_tcp_port: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """With a daemon on the data dir, the CLI asks it (DELETE /api/users/{uid}): its live index and bus
    drop the person, and the files are clean while it keeps running."""
    cfg_path = write_config(tmp_path, host="127.0.0.1", port=unused_tcp_port)
    config = config_of(cfg_path)
    data = Path(config.data_dir)
    canary = _canary()
    gw = await started(config)
    try:
        alice, bob = await converse(gw, canary)
        snapshots = _snapshots(gw)
        theirs = [sid for sid in snapshots if (s := gw.state.sessions.get(sid)) and s.user_id == alice]
        assert theirs, "the profile plugin holds her files in memory"
        code = await asyncio.to_thread(main, ["-c", str(cfg_path), "users", "delete", alice, "--yes"])
        assert code == 0
        assert gw.state.users.get(alice) is None
        assert not set(theirs) & set(snapshots)  # told through gateway_memory_edited
        assert gw.memory is not None and gw.memory.scope_count(user_scope(alice)) == 0
        hits = await gw.memory.recall(scope=user_scope(bob), query="garden meeting thursday", k=3)
        assert hits and "garden meeting" in hits[0].text
        assert files_with(data, canary) == []
        # Again, for an id the database no longer knows: every step runs again on the daemon
        # (?missing_ok=true) and finds nothing left, as without a daemon.
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["-c", str(cfg_path), "users", "delete", alice, "--yes"])
        assert code == 0 and f"nothing of {alice} was left" in capsys.readouterr().out
        # The daemon still serves: a new message from her account is a new person.
        reply = await gw.handle_inbound(message("hello again", account="alice"))
        assert reply is not None
        assert gw.identities.lookup("websocket", "alice") not in (None, alice)
    finally:
        await gw.close()
    assert files_with(data, canary) == []


def test_a_failed_index_step_is_reported_and_a_second_delete_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.memory.search.queue import IndexQueue

    cfg_path = write_config(tmp_path)
    config = config_of(cfg_path)
    data = Path(config.data_dir)
    canary = _canary()

    async def before() -> str:
        gw = await started(config)
        try:
            return (await converse(gw, canary))[0]
        finally:
            await gw.close()

    alice = asyncio.run(before())

    async def no_room(self: IndexQueue) -> None:
        raise OSError("no space left on device")

    with monkeypatch.context() as m:
        m.setattr(IndexQueue, "compact", no_room)
        assert kith(cfg_path, "users", "delete", alice, "--yes") == 0
    err = capsys.readouterr().err
    assert "warning: memory index: no space left on device" in err
    assert any("qdrant" in f for f in files_with(data, canary))  # the shard was not rewritten
    assert not [f for f in files_with(data, canary) if "qdrant" not in f]  # everything else went

    assert kith(cfg_path, "users", "delete", alice, "--yes") == 0
    assert files_with(data, canary) == []
    capsys.readouterr()
    assert kith(cfg_path, "users", "delete", alice, "--yes") == 0
    assert "nothing of" in capsys.readouterr().out
    assert kith(cfg_path, "users", "delete", "websocket:alice", "--yes") == 2  # an account must be known
    assert "no user" in capsys.readouterr().err


def test_her_turns_leave_a_group_conversation_and_the_others_stay(tmp_path: Path) -> None:
    cfg_path = write_config(tmp_path)
    config = config_of(cfg_path)
    data = Path(config.data_dir)
    canary = _canary()

    async def before() -> str:
        gw = await started(config)
        try:
            await gw.handle_inbound(message("bob opens the group: the picnic is on saturday", account="bob",
                                            group="g1"))  # fmt: skip
            await gw.handle_inbound(message(f"alice in the group: my pin is {canary} do not tell", account="alice",
                                            group="g1"))  # fmt: skip
            await gw.handle_inbound(message("bob again: bring the lemonade please", account="bob", group="g1"))
            await gw.settle()
            alice = gw.identities.lookup("websocket", "alice")
            assert alice
            return alice
        finally:
            await gw.close()

    alice = asyncio.run(before())
    assert any(f.startswith("channels/") for f in files_with(data, canary))
    assert kith(cfg_path, "users", "delete", alice, "--yes") == 0
    assert files_with(data, canary) == []
    logs = "".join(p.read_text() for p in (data / "channels").rglob("sessions/*.md"))
    assert "picnic is on saturday" in logs and "bring the lemonade" in logs

    async def after() -> None:
        gw = await started(config)
        try:
            assert gw.memory is not None
            scope = next(s for s in gw.memory.stores.known_scopes() if s.startswith("channel:"))
            hits = await gw.memory.recall(scope=scope, query="picnic saturday", k=5)
            assert any("picnic" in h.text for h in hits)
            assert not any(canary in h.text for h in await gw.memory.recall(scope=scope, query="pin", k=20))
        finally:
            await gw.close()

    asyncio.run(after())
    assert files_with(data, canary) == []
