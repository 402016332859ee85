"""No turn goes missing from the Markdown session log (issue 12, item 5, and the low item "the user's
message is lost when the daemon dies before the reply is stored").

* (a) a shutdown that arrives while the flusher is writing a batch loses nothing of it;
* (c) a batch that cannot be written (read-only directory, a path in the way) is kept, retried with
  backoff, logged once, and lands, once and in order, when the log is writable again;
* (b) turns the transcript has but the logs lack (a kill inside the batch window) are appended at the
  next start, and indexed; a second start adds nothing;
* a message is in the transcript before the model is called, so a crash during the call keeps it.

The process-level version (a real daemon, SIGTERM and SIGKILL) is ``test_daemon_durability.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import gateway.memory.session_writer as session_writer
import plugins.session_log as session_log
from gateway.app import Gateway
from gateway.config import Config
from gateway.hookspecs import hookimpl
from gateway.memory.files.scopes import channel_scope, user_scope
from gateway.memory.files.session_log import parse_entries
from gateway.turn.spool import SpooledTurn
from gateway.types import ConversationKind, InboundMessage, LLMRequest, LLMResponse
from tests.bus.conftest import eventually
from tests.conftest import make_config
from tests.durability.logs import logged_turns, logged_twice, missing_from_logs, transcript_turns
from tests.storage import select_rows, write_rows


def dm(text: str, account: str = "alice") -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, text=text, display_name=account.title(),
                          timestamp=datetime.now(UTC), trusted=True)  # fmt: skip


async def start(cfg: Config, plugins: tuple[Any, ...] = ()) -> Gateway:
    gw = Gateway(cfg, plugins=plugins, entry_points=False)
    try:
        await gw.start()
    except BaseException:
        await gw.close()
        raise
    return gw


def user_root(gw: Gateway, account: str = "alice") -> Path:
    user_id = gw.identities.lookup("websocket", account)
    assert user_id is not None
    return gw.memory.stores.root_for(user_scope(user_id))  # type: ignore[union-attr]


def today_log(gw: Gateway, account: str = "alice") -> Path:
    return user_root(gw, account) / f"sessions/{datetime.now(UTC):%Y-%m-%d}.md"


def the_log(gw: Gateway) -> Any:
    return gw.stash[session_log.SESSION_LOG]


async def reconciled_at_start(cfg: Config) -> int:
    """How many turns a start of the daemon on ``cfg`` appended to the logs (then it stops again)."""
    gw = await start(cfg)
    try:
        await gw.settle()
        return int(the_log(gw).reconciled)
    finally:
        await gw.close()


@contextlib.contextmanager
def holding_write_lock(root: Path, rel: str) -> Iterator[None]:
    """Hold the guarded store's lock of ``rel``: a writer of that file waits inside its batch."""
    name = hashlib.sha1(rel.encode()).hexdigest() + ".lock"
    fd = os.open(root / ".locks" / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_writer, "RETRY_FIRST_S", 0.05, raising=False)
    monkeypatch.setattr(session_writer, "RETRY_MAX_S", 0.2, raising=False)


# ------------------------------------------------------------------------ (a) shutdown mid-batch


@pytest.mark.serial  # the six turns of the burst must all land inside one flush interval (a loaded machine splits them)
async def test_shutdown_while_a_batch_is_written_loses_nothing(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    gw = await start(cfg)
    closing: asyncio.Task[None] | None = None
    try:
        await gw.handle_inbound(dm("hello"))
        await gw.settle()
        root, rel = user_root(gw), f"sessions/{datetime.now(UTC):%Y-%m-%d}.md"
        with holding_write_lock(root, rel):
            # A burst: Alice's file first in the batch, then five other people's.
            await gw.handle_inbound(dm("Alice, in the burst"))
            for i in range(5):
                await gw.handle_inbound(dm(f"person {i}, in the burst", f"p{i}"))
            sl = the_log(gw)
            await eventually(lambda: not sl.pending, timeout=5)  # the flusher took the batch and waits on Alice
            closing = asyncio.create_task(gw.close())  # SIGTERM right after the burst
            await asyncio.sleep(0.3)
    finally:
        await (closing if closing is not None else gw.close())
    data = Path(cfg.data_dir)
    assert len(transcript_turns(data)) == 7
    assert missing_from_logs(data) == [] and logged_twice(data) == []


# ---------------------------------------------------------------- (c) failing appends are retried


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` read-only for this process: by mode, or (as root, whom modes do not stop) by a
    read-only bind mount of it over itself."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(0o755)
        return
    bound = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot make a read-only directory here (root, and mount fails: {bound.stderr!r})")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only: {ro.stderr!r}")
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextlib.contextmanager
def blocked(path: Path) -> Iterator[None]:
    """Something that is not a file where the log file is (every append fails), then the file back."""
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    path.mkdir()
    try:
        yield
    finally:
        path.rmdir()
        aside.rename(path)


@pytest.mark.parametrize("how", ["read-only directory", "path in the way"])
async def test_a_failing_append_keeps_the_batch_and_it_lands_when_writable(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture, quick_retries: None
) -> None:
    cfg = make_config(tmp_path)
    gw = await start(cfg)
    try:
        await gw.handle_inbound(dm("before the trouble"))
        await gw.settle()
        log_file = today_log(gw)
        before = log_file.read_bytes()
        sl = the_log(gw)
        trouble = read_only(log_file.parent) if how == "read-only directory" else blocked(log_file)
        with caplog.at_level(logging.INFO, logger="kith.session_log"), trouble:
            for i in range(3):
                await gw.handle_inbound(dm(f"during the trouble {i}"))
            await eventually(lambda: sl.failure is not None and sl.failure.attempts >= 4, timeout=15)
            await gw.handle_inbound(dm("during the trouble, after some retries"))
            await eventually(lambda: sl.failure.attempts >= 6, timeout=15)
            failures = [r for r in caplog.records if "could not append the session log" in r.getMessage()]
            assert len(failures) == 1, "one log line per failure streak, not one per retry"
            assert (log_file if log_file.is_file() else log_file.with_name(log_file.name + ".aside")).read_bytes() \
                == before
        await eventually(lambda: sl.failure is None and not sl.pending, timeout=15)
        assert [r for r in caplog.records if "writable again" in r.getMessage()]
        texts = [e.text for e in parse_entries(log_file.read_text())]
        assert texts == ["before the trouble", *(f"during the trouble {i}" for i in range(3)),
                         "during the trouble, after some retries"]  # fmt: skip
    finally:
        await gw.close()
    assert missing_from_logs(Path(cfg.data_dir)) == [] and logged_twice(Path(cfg.data_dir)) == []


async def test_a_write_that_landed_but_reported_failure_is_not_written_twice(
    tmp_path: Path, quick_retries: None
) -> None:
    """The log file is replaced, then the audit line fails: the batch is retried, and the retry sees
    that its blocks are already there."""
    cfg = make_config(tmp_path)
    gw = await start(cfg)
    try:
        await gw.handle_inbound(dm("first"))
        await gw.settle()
        audit = user_root(gw) / ".audit.jsonl"
        audit.rename(audit.with_name("audit.aside"))
        audit.mkdir()  # appending the audit line fails after the file was replaced
        sl = the_log(gw)
        await gw.handle_inbound(dm("second"))
        await gw.handle_inbound(dm("third"))
        await eventually(lambda: sl.failure is not None, timeout=5)
        await eventually(lambda: sl.failure is None and not sl.pending, timeout=10)
        audit.rmdir()
    finally:
        await gw.close()
    data = Path(cfg.data_dir)
    assert missing_from_logs(data) == [] and logged_twice(data) == []


# -------------------------------------------------------------------- (b) start-up reconciliation


async def test_start_appends_turns_the_logs_miss_indexes_them_and_a_second_start_adds_nothing(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path)
    data = Path(cfg.data_dir)
    gw = await start(cfg)
    try:
        for text in ("The spare key is under the blue flowerpot.", "My dentist is Dr. Okafor on Elm Street.",
                     "The wifi password at the cabin is heron-42."):
            await gw.handle_inbound(dm(text))
        await gw.handle_inbound(replace(dm("The team offsite is in Porto."), conversation_id="team",
                                        kind=ConversationKind.GROUP, mentioned=True))  # fmt: skip
        await gw.settle()
        log_file = today_log(gw)
        group_log = gw.memory.stores.root_for(channel_scope("websocket:team")) / log_file.relative_to(user_root(gw))
    finally:
        await gw.close()
    # What a kill inside the first batch window leaves: turns in the transcript, no Markdown log.
    log_file.unlink()
    group_log.unlink()
    assert len(missing_from_logs(data)) == 4

    gw = await start(cfg)
    try:
        await gw.settle()
        assert the_log(gw).reconciled == 4
        assert missing_from_logs(data) == [] and logged_twice(data) == []
        user_id = gw.identities.lookup("websocket", "alice")
        hits = await gw.memory.recall(scope=user_scope(user_id), query="what is the cabin wifi password?", k=3)
        assert hits and "heron-42" in hits[0].text and hits[0].source.startswith("sessions/")
        assert "Porto" in parse_entries(group_log.read_text())[0].text, "a group's turn goes back to the group"
    finally:
        await gw.close()
    after = log_file.read_bytes()

    assert await reconciled_at_start(cfg) == 0
    assert log_file.read_bytes() == after, "a second start adds nothing"


async def test_a_start_never_writes_back_a_turn_whose_log_it_already_has(tmp_path: Path) -> None:
    """Logs of every day in the window are compared, so a fresh watermark (an upgrade) duplicates
    nothing, also when the turns sit in a continuation part of the day."""
    cfg = make_config(tmp_path, memory={"max_file_bytes": 4096})
    data = Path(cfg.data_dir)
    gw = await start(cfg)
    try:
        for i in range(12):
            await gw.handle_inbound(dm(f"line {i}: " + "words to fill the file " * 8))
        await gw.settle()
        write_rows(gw.state, "DELETE FROM watermarks")
    finally:
        await gw.close()
    assert len(list((data / "users").glob("*/sessions/*.2.md"))) == 1
    before = {p: p.read_bytes() for p in (data / "users").glob("*/sessions/*.md")}
    assert await reconciled_at_start(cfg) == 0
    assert {p: p.read_bytes() for p in (data / "users").glob("*/sessions/*.md")} == before


# ----------------------------------------------------------- the message is kept through a crash


class HangingModel:
    """A model call that never returns: the daemon dies while it runs."""

    __name__ = "hanging_model"

    def __init__(self) -> None:
        self.called = asyncio.Event()

    @hookimpl
    async def gateway_llm_call(self, request: LLMRequest) -> LLMResponse:
        self.called.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_the_message_is_stored_before_the_model_call_and_survives_a_crash_during_it(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    data = Path(cfg.data_dir)
    model = HangingModel()
    gw = await start(cfg, plugins=(model,))
    try:
        turn = asyncio.create_task(gw.handle_inbound(dm("Please remember: the boat leaves at 7.")))
        await asyncio.wait_for(model.called.wait(), 10)
        # Committed, so visible to another connection, while the model is still thinking.
        assert list(transcript_turns(data).values()) == ["Please remember: the boat leaves at 7."]
        turn.cancel()  # the process dies here: no reply is ever stored
        with contextlib.suppress(asyncio.CancelledError):
            await turn
    finally:
        await gw.close()
    with sqlite3.connect(data / "state.sqlite") as db:
        assert [r[0] for r in db.execute("SELECT role FROM turns")] == ["user"]

    gw = await start(cfg)
    try:
        await gw.settle()
        (entry,) = parse_entries(today_log(gw).read_text())
        assert entry.text == "Please remember: the boat leaves at 7." and entry.reply is None
        reply = await gw.handle_inbound(dm("And what time was that?"))
        assert reply is not None and "messages 2" in reply.text, "the kept message is history for the next turn"
    finally:
        await gw.close()
    assert missing_from_logs(data) == []


async def test_a_failed_model_call_still_leaves_no_turn(make_gateway: Any) -> None:
    """Unchanged: a model error is shown to the person, who sends again; the message is taken back."""
    from gateway.llm.base import LLMError

    class Failing:
        __name__ = "failing_model"

        @hookimpl
        async def gateway_llm_call(self, request: LLMRequest) -> LLMResponse:
            raise LLMError("down", user_message="the model is down")

    gw = await make_gateway(plugins=(Failing(),))
    reply = await gw.handle_inbound(dm("hello?"))
    assert reply is not None and reply.notice and reply.text == "the model is down"
    assert select_rows(gw.state, "SELECT * FROM turns") == []
    await gw.settle()
    assert logged_turns(Path(gw.config.data_dir)) == {}


async def test_a_log_that_cannot_be_read_is_compared_again_at_the_next_start(tmp_path: Path) -> None:
    """A day file the store refuses to read (here a hard link to a file outside the root) cannot be
    compared: nothing is appended on a guess and the watermark stays, so a later start does it."""
    cfg = make_config(tmp_path)
    data = Path(cfg.data_dir)
    gw = await start(cfg)
    try:
        await gw.handle_inbound(dm("The garage door code is 4711."))
        await gw.settle()
        log_file = today_log(gw)
    finally:
        await gw.close()
    log_file.unlink()
    outside = tmp_path / "outside.md"
    outside.write_text("not a kith log\n")
    os.link(outside, log_file)
    gw = await start(cfg)
    try:
        await gw.settle()
        assert the_log(gw).reconciled == 0 and gw.state.watermarks.get(session_writer.WATERMARK) == 0
    finally:
        await gw.close()
    log_file.unlink()
    gw = await start(cfg)
    try:
        await gw.settle()
        assert the_log(gw).reconciled == 1 and gw.state.watermarks.get(session_writer.WATERMARK) > 0
    finally:
        await gw.close()
    assert missing_from_logs(data) == [] and outside.read_text() == "not a kith log\n"


async def test_a_spooled_turn_the_transcript_lacks_is_logged_from_the_spool(tmp_path: Path) -> None:
    """At start, a turn of the turn spool that the write-back could not put in the transcript yet (a
    full disk: gateway/turn/writeback.py) is queued for the Markdown log from the spool, message and reply,
    in its person's log: the catch-up, which reads the transcript, cannot see it."""
    gw = await start(make_config(tmp_path))
    try:
        await gw.handle_inbound(dm("hello"))
        await gw.settle()
        user_id = gw.identities.lookup("websocket", "alice")
        assert user_id is not None
        session = gw.state.sessions.open_in(user_scope(user_id))
        assert session is not None
        now = datetime.now(UTC)
        spooled = SpooledTurn(turn_id="t-spooled", session_id=session.session_id, user_id=user_id,
                              channel="websocket", conversation_key=session.conversation_key, speaker="Alice",
                              text="The walrus is called Olaf.", at=now, reply="Noted: Olaf.",
                              reply_at=now)  # fmt: skip
        the_log(gw).add_spooled(spooled)
        await gw.settle()
        entries = [e for e in parse_entries(today_log(gw).read_text()) if e.turn_id == "t-spooled"]
        assert len(entries) == 1
        assert entries[0].text == "The walrus is called Olaf." and entries[0].reply == "Noted: Olaf."
        assert "t-spooled" in the_log(gw).spooled  # the catch-up leaves it to the spool
    finally:
        await gw.close()
