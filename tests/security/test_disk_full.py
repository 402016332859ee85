"""A full disk never kills the daemon, never keeps it dead, and loses no turn (issue 12, item 4).

The embedded Qdrant index writes through memory-mapped files: on a full disk an index write (or the
write-ahead-log replay when the index opens) is a SIGBUS, exit 135 with no log line, and before the
fix every turn also answered "internal" once SQLite could not store it, while /healthz said ok.

In-process tests hold the free-space floor (``memory.min_free_mb``) above what the disk has, which
is a real measurement against a real floor, and make SQLite itself refuse pages
(``PRAGMA max_page_count``: the same SQLITE_FULL a full disk gives). The last test is the real
thing: ``kith run`` on a small tmpfs that a filler file fills up, driven over the WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import Gateway
from gateway.memory.files.scopes import user_scope
from gateway.memory.files.session_log import ASSISTANT
from gateway.memory.search.index import IndexBusyError, IndexPoint, SparseVec, point_id
from gateway.testing import test_config
from gateway.turn.spool import SPOOL_FILE, TurnSpool
from gateway.turn.writeback import NOT_KEPT_NOTE
from gateway.types import InboundMessage
from gateway.util.diskspace import MB, LowDiskSpaceError
from tests.bus.conftest import eventually
from tests.conftest import WSClient
from tests.durability.logs import answered_turns, logged_texts
from tests.durability.test_session_log_durability import blocked
from tests.kith_run import Daemon, free_port, write_config
from tests.storage import select_one

ROOT = Path(__file__).resolve().parents[2]
NO_DISK = 10**12  # memory.min_free_mb above any disk: every measurement is "low"


def dm(text: str, account: str = "alice") -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, text=text, display_name=account.title(),
                          timestamp=datetime.now(UTC), trusted=True, message_id=uuid.uuid4().hex)


async def health(gw: Gateway) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{gw.port}/healthz") as resp:
        assert resp.status == 200
        return await resp.json()  # type: ignore[no-any-return]


def user_of(gw: Gateway, account: str = "alice") -> str:
    uid = gw.identities.lookup("websocket", account)
    assert uid is not None
    return uid


async def findable(gw: Gateway, user: str, marker: str) -> bool:
    assert gw.memory is not None
    hits = await gw.memory.recall(scope=user_scope(user), query=marker, k=5)
    return any(marker in h.text for h in hits)


async def index_queue(gw: Gateway) -> dict[str, int]:
    assert gw.bus is not None
    status = {q.name: q for q in await gw.bus.status()}
    q = status["memory.index"]
    return {"pending": q.pending, "in_flight": q.in_flight, "delayed": q.delayed, "dead": q.dead}


# ------------------------------------------------------------------------------------ in-process


async def test_low_space_pauses_index_jobs_without_burning_their_retries(make_gateway: Any) -> None:
    """Index jobs that arrive while indexing is paused succeed at once and their work is kept: no
    retry backoff, no dead letter however long the pause; it is replayed when space returns."""
    gw = await make_gateway(memory={"disk_check_s": 3600}, bus={"retry_backoff_s": 0.05, "retry_backoff_max_s": 0.05})
    assert gw.memory is not None and gw.bus is not None
    await gw.handle_inbound(dm("warm-up before the disk fills"))
    await gw.settle()
    user = user_of(gw)
    before = gw.memory.scope_count(user_scope(user))

    gw.memory.indexing.floor.min_free_bytes = NO_DISK * MB
    await gw.memory.indexing.check_disk()
    markers = [f"quokka-{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
    for m in markers:
        reply = await gw.handle_inbound(dm(f"remember the {m}"))
        assert reply is not None and not reply.notice and m in reply.text
    await gw.settle()
    assert await index_queue(gw) == {"pending": 0, "in_flight": 0, "delayed": 0, "dead": 0}
    assert await gw.bus.dead() == []
    assert gw.memory.scope_count(user_scope(user)) == before  # nothing written to the index
    assert gw.memory.stats()["paused"] and gw.memory.stats()["kept"] >= 1
    body = await health(gw)
    assert body["status"] == "degraded" and "indexing paused" in body["degraded"][0]

    gw.memory.indexing.floor.min_free_bytes = 1  # space is back
    await gw.memory.indexing.check_disk()
    await gw.settle()
    assert not gw.memory.indexing.paused
    for m in markers:
        assert await findable(gw, user, m), m
    assert (await health(gw))["status"] == "ok"
    assert await gw.bus.dead() == []


async def test_an_index_write_below_the_floor_is_not_attempted(make_gateway: Any) -> None:
    """Between two disk checks the disk fills: the write itself checks, raises instead of writing
    (no SIGBUS), and the job's work is kept; the pause starts there."""
    gw = await make_gateway(memory={"disk_check_s": 3600})
    assert gw.memory is not None and gw.bus is not None
    await gw.handle_inbound(dm("warm-up"))
    await gw.settle()
    gw.memory.indexing.floor.min_free_bytes = NO_DISK * MB
    index = gw.memory.loader.index
    points = index.count()
    dim = gw.memory.loader.embedder.dim
    point = IndexPoint(point_id("user:x", "c1"), [0.1] * dim, SparseVec([], []), {"scope": "user:x"})
    with pytest.raises(LowDiskSpaceError, match="indexing is paused"):
        index.upsert([point])
    with pytest.raises(LowDiskSpaceError):
        index.delete_ids([point.id])
    assert index.count() == points
    assert not gw.memory.indexing.paused  # nobody has looked yet
    await gw.handle_inbound(dm("the capybara sleeps in the bathtub"))
    await gw.settle()
    assert gw.memory.indexing.paused and gw.memory.stats()["kept"] >= 1
    assert await gw.bus.dead() == []
    gw.memory.indexing.floor.min_free_bytes = 1
    await gw.memory.indexing.check_disk()
    await gw.settle()
    assert await findable(gw, user_of(gw), "capybara")


async def test_start_without_room_for_the_index_answers_and_opens_it_later(make_gateway: Any) -> None:
    """No room to open the index at start: the gateway starts anyway (no crash loop), recalls on
    keywords alone (seed 004's BM25 fallback, over the files), says so in /healthz, and opens and
    catches up the index when space returns."""
    gw = await make_gateway(memory={"min_free_mb": NO_DISK, "disk_check_s": 3600})
    assert gw.memory is not None
    assert not (gw.data_dir / "qdrant").exists()  # not even the lock file was created
    reply = await gw.handle_inbound(dm("the narwhal is called Sven"))
    assert reply is not None and not reply.notice and "narwhal" in reply.text
    await gw.settle()
    body = await health(gw)
    assert body["status"] == "degraded" and "index is not open: recall is keyword only" in body["degraded"][0]
    user = user_of(gw)
    assert gw.memory.keyword_only and gw.memory.stats()["points"] == 0
    hits = await gw.memory.recall(scope=user_scope(user), query="narwhal", k=3)
    assert hits and "Sven" in hits[0].text  # from the session log, by its words

    gw.memory.indexing.floor.min_free_bytes = 1
    await gw.memory.indexing.check_disk()
    await gw.settle()
    assert await findable(gw, user, "narwhal")
    assert (await health(gw))["status"] == "ok"


def _fill_sqlite(gw: Gateway) -> None:
    """SQLite can allocate no more pages: its SQLITE_FULL, "database or disk is full"."""
    pages = select_one(gw.state, "PRAGMA page_count")[0]
    gw.state.db.execute(f"PRAGMA max_page_count={int(pages)}")


async def test_turns_answer_when_only_persistence_fails(make_gateway: Any, caplog: pytest.LogCaptureFixture) -> None:
    gw = await make_gateway(memory={"disk_check_s": 3600})
    await gw.handle_inbound(dm("hello before the database fills"))
    await gw.settle()
    _fill_sqlite(gw)
    caplog.set_level(logging.ERROR, logger="kith.turn")
    big = "x" * 20_000  # needs new pages (overflow pages), whatever room the last page has
    for i in range(5):
        reply = await gw.handle_inbound(dm(f"turn {i} {big}"))
        assert reply is not None and not reply.notice and f"turn {i}" in reply.text
        assert NOT_KEPT_NOTE not in reply.text  # kept in the turn spool: nothing to tell
    assert not gw.state.db.in_transaction  # the failed COMMIT did not leave a transaction open
    failures = [r for r in caplog.records if r.name == "kith.turn" and r.levelno >= logging.ERROR]
    assert len(failures) == 1, [r.getMessage() for r in failures]  # once per interval, not per turn
    body = await health(gw)
    assert body["status"] == "degraded"
    assert any("turn persistence failing" in p and "database or disk is full" in p for p in body["degraded"])
    assert any("5 answered turns wait in the turn spool" in p for p in body["degraded"]), body

    gw.state.db.execute("PRAGMA max_page_count=1073741823")
    reply = await gw.handle_inbound(dm("space again"))
    assert reply is not None and not reply.notice
    assert select_one(gw.state, "SELECT COUNT(*) FROM turns WHERE content LIKE 'space again%'")[0] == 1
    # The turn's writes succeeded: the spooled turns are written back (in the background) at once.
    await eventually(lambda: _status(gw, "ok"), timeout=10)
    sides = select_one(gw.state, "SELECT SUM(role='user'), SUM(role='assistant') FROM turns"
                                 " WHERE content LIKE '%turn _ x%'")
    assert tuple(sides) == (5, 5)  # both sides of every turn


async def _status(gw: Gateway, status: str) -> bool:
    return (await health(gw))["status"] == status


async def test_spooled_turns_are_in_the_transcript_the_markdown_log_and_search_after_a_restart(tmp_path: Path) -> None:
    """The transcript refuses the turns (SQLite full) and the Markdown log cannot be written either:
    the daemon stops with them only in the turn spool. The next start writes them back, the session
    log's catch-up appends them to the Markdown log, and they are found (issue 27, item 3)."""
    cfg = test_config(tmp_path / "data", memory={"disk_check_s": 3600})
    markers = [f"okapi{i}x{uuid.uuid4().hex[:6]}" for i in range(3)]
    gw = Gateway(cfg)
    closed = False
    try:
        await gw.start()
        await gw.handle_inbound(dm("hello before the disk fills"))
        await gw.settle()
        user = user_of(gw)
        log = gw.memory.stores.root_for(user_scope(user)) / f"sessions/{datetime.now(UTC):%Y-%m-%d}.md"  # type: ignore[union-attr]
        assert log.is_file()
        _fill_sqlite(gw)
        with blocked(log):  # every append to the Markdown log fails meanwhile
            for m in markers:
                reply = await gw.handle_inbound(dm(f"the code word is {m} {'x' * 20_000}"))  # new pages
                assert reply is not None and not reply.notice and m in reply.text and NOT_KEPT_NOTE not in reply.text
            closed = True
            await gw.close()  # the session log gives up on its queue: "the next start writes them"
    finally:
        if not closed:
            await gw.close()
    assert (tmp_path / "data" / SPOOL_FILE).stat().st_size == 4 * MB
    assert not any(m in text for m in markers for text, _ in answered_turns(tmp_path / "data").values())

    async with Gateway(cfg) as gw:
        await gw.settle()
        turns = answered_turns(tmp_path / "data").values()
        for m in markers:
            assert any(m in text and reply and m in reply for text, reply in turns), m  # message and reply
        texts = logged_texts(tmp_path / "data")
        assert all(any(m in t and f"\n{ASSISTANT}: " in t for t in texts) for m in markers), texts
        for m in markers:
            assert await findable(gw, user, m), m
        h = await health(gw)
        assert h["status"] == "ok", h
    spool = TurnSpool(tmp_path / "data", 4 * MB)  # written back once: the next start finds it empty
    assert spool.open() and spool.records == []
    spool.close()


async def test_a_turn_that_cannot_be_kept_says_so_in_its_reply(make_gateway: Any) -> None:
    """No turn spool (``state.spool_mb: 0``), and the transcript refuses the turn: the person gets the
    model's reply and is told, in it, that this exchange is not kept."""
    gw = await make_gateway(memory={"disk_check_s": 3600}, state={"spool_mb": 0})
    await gw.handle_inbound(dm("hello before the database fills"))
    await gw.settle()
    assert not (gw.data_dir / SPOOL_FILE).exists()
    _fill_sqlite(gw)
    reply = await gw.handle_inbound(dm(f"turn that is lost {'x' * 20_000}"))
    assert reply is not None and not reply.notice and "turn that is lost" in reply.text
    assert reply.text.endswith(NOT_KEPT_NOTE) and reply.chunks[-1] == NOT_KEPT_NOTE
    body = await health(gw)
    assert any("1 answered turns could not be kept (their people were told)" in p for p in body["degraded"]), body


# ------------------------------------------------------------------------- the real daemon, tmpfs

# On tmpfs, opening an existing index may fill every hole of its memory maps (~180 MB for a small
# index; gateway/util/diskspace.py): the restart phase needs that much on top of the floor.
TMPFS_MB = 320
FLOOR_MB = 64  # memory.min_free_mb of the daemon under test
BELOW_FLOOR_MB = 32  # phase 1: room for SQLite and Markdown, none for the index


@contextlib.contextmanager
def tmpfs(where: Path, size_mb: int) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def free_mb(path: Path) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / MB


def fill(filler: Path, leave_mb: float = 0) -> None:
    """Grow ``filler`` until only ``leave_mb`` is free (0: until the filesystem refuses a byte)."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (MB, 4096, 1):
            block = b"\0" * size
            while free_mb(filler.parent) - size / MB >= leave_mb:
                try:
                    os.write(fd, block)
                except OSError:
                    break
    finally:
        os.close(fd)


class Client:
    """WebSocket chat and operator calls against one daemon."""

    def __init__(self, http: aiohttp.ClientSession, port: int, data_dir: Path) -> None:
        self.http, self.port, self.data_dir = http, port, data_dir
        self.base = f"http://127.0.0.1:{port}"

    async def chat(self, client_id: str) -> tuple[WSClient, str]:
        ws = WSClient(await self.http.ws_connect(f"{self.base}/ws"))
        ready = await ws.hello(client_id, "Dana")
        assert ready["type"] == "ready", ready
        return ws, str(ready["user_id"])

    async def health(self) -> dict[str, Any]:
        async with self.http.get(f"{self.base}/healthz") as resp:
            assert resp.status == 200
            return await resp.json()  # type: ignore[no-any-return]

    def _operator(self) -> dict[str, str]:
        token = self.data_dir / "operator.token"  # docs/security.md: what `kith memory search` sends
        return {"Authorization": f"Bearer {token.read_text().strip()}"} if token.exists() else {}

    async def search(self, user: str, query: str) -> list[str]:
        async with self.http.get(f"{self.base}/api/users/{user}/recall", params={"q": query, "k": "5"},
                                 headers=self._operator()) as resp:
            assert resp.status == 200, await resp.text()
            return [h["text"] for h in (await resp.json())["hits"]]

    async def missing(self, user: str, markers: list[str]) -> list[str]:
        return [m for m in markers if not any(m in text for text in await self.search(user, m))]


async def ask(ws: WSClient, text: str) -> str:
    frame, _ = await ws.ask(text)
    assert frame["type"] == "reply" and not frame.get("notice"), frame
    assert text in frame["text"], frame  # the echo model's reply, not an error notice
    return str(frame["text"])


async def wait_for(what: str, check: Any, timeout: float, daemon: Daemon, detail: Any = None) -> float:
    """Poll ``check()`` until true; seconds it took. ``detail()``: what the timeout message shows."""
    start = time.monotonic()
    while not await check():
        assert daemon.alive(), f"the daemon died:\n{daemon.log_text()[-4000:]}"
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what} not within {timeout}s" + (f": {detail()}" if detail else ""))
        await asyncio.sleep(0.25)
    return time.monotonic() - start


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.mark.long
async def test_daemon_on_a_full_disk_stays_up_answers_and_loses_nothing(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """Turns answered on the full disk are in the transcript, the Markdown log and search once space
    returns: while the daemon runs, after a restart on the still-full disk, and after a SIGKILL on the
    full disk and a start once space is back (issue 27, item 3: these were lost)."""
    figures: dict[str, Any] = {}
    with tmpfs(tmp_path / "mnt", TMPFS_MB) as mnt:
        data = mnt / "data"
        port = free_port()
        cfg = write_config(tmp_path / "kith.yaml", data, port,
                           memory={"min_free_mb": FLOOR_MB, "disk_check_s": 0.5})
        daemon = Daemon(cfg, tmp_path / "daemon.log").start()
        filler = mnt / "filler"
        try:
            api = Client(http, port, data)
            ws, user = await api.chat("dana-laptop")
            markers: list[str] = []

            async def turn(phase: str) -> None:
                marker = f"{phase}{len(markers)}x{uuid.uuid4().hex[:6]}"
                markers.append(marker)
                await ask(ws, f"please remember the code word {marker}")

            async def everywhere(what: str) -> float:
                """Seconds until every turn so far is in all three places (the daemon polled alive)."""
                missing: dict[str, list[str]] = {}
                return await wait_for(what, lambda: _everywhere(api, data, user, markers, missing), 120, daemon,
                                      detail=lambda: {"missing from": missing})

            await turn("before")
            assert (await api.health())["status"] == "ok"
            reserve = data / "disk.reserve"  # kept while there is room: a quarter of the floor
            assert reserve.stat().st_blocks * 512 >= FLOOR_MB * MB // 4
            spool = data / SPOOL_FILE  # taken while there is room: where turns wait on a full disk
            assert spool.stat().st_blocks * 512 >= 4 * MB

            # 1. Below the floor, not full: SQLite and the Markdown log still write, the index must not.
            fill(filler, leave_mb=BELOW_FLOOR_MB)
            for _ in range(5):
                await turn("low")
            # Their index jobs ran (and succeeded) while paused: the work is kept, not retried or lost.
            await wait_for("index work kept while paused", lambda: _kept(api), 15, daemon)

            # 2. Full: not one more byte. Turns still get the model's reply, not a word about storage:
            # the transcript cannot take them, the turn spool does.
            fill(filler)
            assert free_mb(mnt) < 0.01
            full = 10
            for _ in range(full):
                await turn("full")
            figures["turns answered on the full disk"] = full
            # The daemon stays up through background writes on the full disk (the session log's retries).
            await wait_for("a session-log append failing on the full disk",
                           lambda: _logged(daemon, "could not append the session log"), 15, daemon)
            assert daemon.alive(), daemon.log_text()[-4000:]
            body = await api.health()
            assert body["status"] == "degraded", body
            # (all of them, unless the WAL file still had room from before: SQLite reuses it after a checkpoint)
            spooled = [re.search(r"(\d+) answered turns wait in the turn spool", p) for p in body["degraded"]]
            assert any(m and int(m.group(1)) >= 1 for m in spooled), body
            assert "Fatal Python error" not in daemon.log_text()

            # 3. Space returns: the turns are written back, and indexing resumes, by themselves.
            await ws.ws.close()
            filler.unlink()
            figures["recovery_s"] = round(await everywhere("every turn everywhere"), 1)
            ws, _ = await api.chat("dana-laptop")
            await wait_for("health ok", lambda: _healthy(api, ws), 30, daemon)
            await ws.ws.close()

            # 4. Restart on a still-full disk: no crash loop, turns are answered (without recall).
            assert daemon.stop() == 0, daemon.log_text()[-4000:]
            fill(filler)
            daemon = Daemon(cfg, tmp_path / "daemon2.log").start()
            # It stays up (the old code died: SQLite could not even open) and says why it is degraded.
            await wait_for("the index reported not open", lambda: _degraded(api, "not open"), 15, daemon)
            assert daemon.alive(), daemon.log_text()[-4000:]
            assert f"released the {FLOOR_MB // 4} MB start-up reserve" in daemon.log_text() and not reserve.exists()
            body = await api.health()
            assert body["status"] == "degraded" and any("not open" in p for p in body["degraded"]), body
            ws, again = await api.chat("dana-laptop")
            assert again == user
            await turn("restart")
            await ws.ws.close()
            filler.unlink()
            figures["recovery after restart_s"] = round(await everywhere("every turn everywhere after the restart"), 1)

            assert "Traceback" not in daemon.log_text().split("kith is running")[0]  # a clean start on a full disk

            # 5. Full again, turns answered, then SIGKILL: nothing in memory survives it. Space returns
            # while the daemon is down; the next start writes the spooled turns back.
            fill(filler)
            ws, _ = await api.chat("dana-laptop")
            for _ in range(5):
                await turn("killed")
            await ws.ws.close()
            os.kill(daemon.pid, signal.SIGKILL)
            assert daemon.proc is not None and daemon.proc.wait(30) == -signal.SIGKILL
            stop_orphaned_bus(data)
            filler.unlink()
            started = time.monotonic()
            daemon = Daemon(cfg, tmp_path / "daemon3.log").start()
            figures["everywhere after the SIGKILL and a start_s"] = round(
                await everywhere("every turn everywhere after the SIGKILL") + time.monotonic() - started, 1)
            assert "holds 5 answered turns an earlier run could not store" in daemon.log_text()
            assert daemon.stop() == 0
            log = daemon.log_text()
            assert "Traceback" not in log.split("kith is running")[0]  # a clean start
        finally:
            daemon.stop()
            stop_orphaned_bus(data)
            print("disk-full figures:", json.dumps(figures))


async def _everywhere(api: Client, data: Path, user: str, markers: list[str], missing: dict[str, list[str]]) -> bool:
    """Every marker's turn, message and reply, is in the transcript, in the Markdown log and found by
    `kith memory search` (the operator API it calls)."""
    turns = answered_turns(data).values()
    texts = logged_texts(data)
    missing.update({
        "transcript": [m for m in markers if not any(m in text and reply for text, reply in turns)],
        "markdown": [m for m in markers if not any(m in t and f"\n{ASSISTANT}: " in t for t in texts)],
        "search": await api.missing(user, markers),
    })
    return not any(missing.values())


async def _logged(daemon: Daemon, text: str) -> bool:
    return text in daemon.log_text()


async def _degraded(api: Client, reason: str) -> bool:
    body = await api.health()
    return body["status"] == "degraded" and any(reason in p for p in body["degraded"])


async def _kept(api: Client) -> bool:
    body = await api.health()
    kept = [re.search(r"(\d+) index operations kept", p) for p in body["degraded"]]
    return body["status"] == "degraded" and any(k and int(k.group(1)) > 0 for k in kept)


async def _none_missing(api: Client, user: str, markers: list[str]) -> bool:
    return not await api.missing(user, markers)


async def _healthy(api: Client, ws: WSClient) -> bool:
    await ask(ws, f"ping {uuid.uuid4().hex[:6]}")  # a turn whose writes succeed clears the persistence state
    return (await api.health())["status"] == "ok"


async def test_restart_without_room_for_the_index_maps_does_not_sigbus(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    """The issue's crash loop: on tmpfs, opening an existing index populates its memory maps (tens of
    MB that were holes). With less free space than that, the old daemon died of SIGBUS (exit 135)
    at every start. Free space is above the floor here, so only the open-cost check keeps it closed."""
    floor_mb, leave_mb = 16, 40  # above the floor; below what opening fills in (~46 MB measured)
    with tmpfs(tmp_path / "mnt", TMPFS_MB) as mnt:
        data = mnt / "data"
        port = free_port()
        cfg = write_config(tmp_path / "kith.yaml", data, port, memory={"min_free_mb": floor_mb, "disk_check_s": 0.5})
        daemon = Daemon(cfg, tmp_path / "daemon.log").start()
        try:
            api = Client(http, port, data)
            ws, user = await api.chat("erin-phone")
            await ask(ws, "the first code word is wombat17")
            await ws.ws.close()
            await wait_for("the first turn findable", lambda: _none_missing(api, user, ["wombat17"]), 60, daemon)
            assert daemon.stop() == 0

            fill(mnt / "filler", leave_mb=leave_mb)
            assert free_mb(mnt) > floor_mb
            daemon = Daemon(cfg, tmp_path / "daemon2.log").start()
            # It stays up (the old daemon died of SIGBUS opening the index) and says why it is degraded.
            await wait_for("the index reported not open", lambda: _degraded(api, "not open"), 15, daemon)
            assert daemon.alive(), daemon.log_text()[-4000:]
            assert "Fatal Python error" not in daemon.log_text()
            body = await api.health()
            assert body["status"] == "degraded" and any("not open" in p for p in body["degraded"]), body
            assert "fills in on this filesystem" in " ".join(body["degraded"])
            ws, _ = await api.chat("erin-phone")
            await ask(ws, "the second code word is dingo42")
            await ws.ws.close()

            (mnt / "filler").unlink()
            took = await wait_for("both turns findable", lambda: _none_missing(api, user, ["wombat17", "dingo42"]),
                                  60, daemon)
            print(f"index opened and caught up {took:.1f}s after space returned")
            assert daemon.stop() == 0
        finally:
            daemon.stop()


async def test_a_fatal_signal_leaves_a_traceback_in_the_log(tmp_path: Path) -> None:
    """faulthandler in `kith run`: a SIGBUS (what a memory-mapped write on a full disk raises) is no
    longer a silent exit 135."""
    daemon = Daemon(write_config(tmp_path / "kith.yaml", tmp_path / "data", free_port()), tmp_path / "d.log").start()
    try:
        os.kill(daemon.pid, signal.SIGBUS)
        assert daemon.proc is not None
        assert daemon.proc.wait(30) == -signal.SIGBUS  # 135 in a shell: the signal is re-raised
        log = daemon.log_text()
        assert "Fatal Python error: Bus error" in log
        assert 'File "' in log.split("Fatal Python error: Bus error", 1)[1]  # the Python stacks follow
    finally:
        daemon.stop()
        stop_orphaned_bus(tmp_path / "data")


def stop_orphaned_bus(data: Path) -> None:
    """A daemon killed by a signal leaves its embedded redis-server behind: stop that one (its pid file)."""
    pid_file = data / "redis" / "redis.pid"
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)


async def test_a_worker_without_room_leaves_index_jobs_to_the_daemon(tmp_path: Path) -> None:
    """A `kith worker` that cannot open the index for lack of space runs detached: it never takes
    (and acks) `memory.*` jobs whose work it could only keep in its own memory."""
    from gateway.configread import parse_config
    from gateway.memory.search.service import MemoryService

    config = parse_config({"data_dir": str(tmp_path / "data"), "memory": {"min_free_mb": NO_DISK}}, env={})
    svc = MemoryService(config, detach_if_busy=True)
    await svc.start()
    try:
        assert svc.detached and not svc.indexing.paused
        with pytest.raises(IndexBusyError, match="without the memory index"):
            await svc.indexing.index_file("user:someone", "notes.md")
    finally:
        await svc.close()
