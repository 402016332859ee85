"""The daemon answers before its memory has loaded (``Gateway(background_load=True)``, what ``kith
run`` uses): a turn that arrives while the embedder and index load proceeds without recall and says
so in its context record and in ``kith context``; once loading ends, recall runs again.

Loading is held up the way a second process would hold it: by the index's open lock, which
``IndexLoader.open_index`` takes before opening the shard (no mocks, no sleeps)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gateway.app import Gateway
from gateway.cli.context import render
from gateway.memory.files.scopes import user_scope
from gateway.memory.search.readiness import LOADING
from gateway.turn.explain import explain
from tests.conftest import make_config
from tests.memory_stages.conftest import msg
from tests.storage import select_rows

LINKS = [{"user": "ada", "accounts": ["websocket:ada"]}]


@contextmanager
def index_open_held(data_dir: Path) -> Iterator[None]:
    lock_dir = data_dir / "qdrant"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / ".open.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _last_record(gw: Gateway) -> dict[str, object]:
    rows = select_rows(gw.state, "SELECT data FROM turn_contexts ORDER BY created_at")
    assert rows, "the turn's context record was not stored"
    return dict(json.loads(rows[-1]["data"]))


async def test_a_turn_before_the_index_is_ready_goes_without_recall_and_says_so(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, identity_links=LINKS)
    gw = Gateway(cfg, entry_points=False, serve_http=False, background_load=True)
    try:
        with index_open_held(Path(cfg.data_dir)):
            await gw.start()  # returns while the index cannot be opened
            memory = gw.memory
            assert memory is not None and not memory.ready
            reply = await gw.handle_inbound(msg("What do I drink in the garden every morning?"))
            assert reply is not None and reply.text  # answered, not held up by the loading index
            assert not memory.ready  # still held: the turn really ran before recall was ready
            assert _last_record(gw)["recall_skipped"] == LOADING
            seen = await explain(gw, user_id="ada", channel="websocket", text="and the tea?")
            assert seen["recall_skipped"] == LOADING
            assert f"recall skipped: {LOADING}" in render(seen)
            # Index work that arrives meanwhile (a memory written now) waits for the index, not fails.
            gw.memory_store("ada").write("topics/tea.md", "# Tea\n\nAda drinks lapsang souchong tea.\n",
                                         source="test")
        deadline = time.monotonic() + 120
        while not memory.ready:  # the lock is released: loading finishes on its own
            assert time.monotonic() < deadline, "memory did not become ready"
            await asyncio.sleep(0.01)
        assert memory.load_error == ""
        await gw.settle()
        reply = await gw.handle_inbound(msg("What tea do I drink?"))
        assert reply is not None
        assert _last_record(gw)["recall_skipped"] is None
        hits = await memory.recall(scope=user_scope("ada"), query="lapsang souchong tea", k=3)
        assert any("lapsang" in h.text for h in hits)  # the write made while loading was indexed
    finally:
        await gw.close()


CORE = ["plugins.memory_index", "plugins.recall", "plugins.profile", "plugins.people", "plugins.compaction",
        "plugins.memory_writer", "plugins.sleep_cycle", "plugins.distill", "plugins.retention", "plugins.known_facts",
        "plugins.tools"]


async def test_without_recall_and_live_indexing_memory_loads_on_first_use(tmp_path: Path) -> None:
    """The "core" gateway (memory stages denied) never needs the embedder per turn: the daemon does not
    load it (~65 MB) until something asks, and then that caller waits for it."""
    cfg = make_config(tmp_path, identity_links=LINKS, plugins={"entry_points": False, "deny": CORE})
    async with Gateway(cfg, entry_points=False, serve_http=False, background_load=True) as gw:
        memory = gw.memory
        assert memory is not None
        for text in ("hello", "what did I say about tea?"):
            reply = await gw.handle_inbound(msg(text))
            assert reply is not None and reply.text
        await gw.settle()
        assert not memory.ready  # nothing loaded it: no recall stage, no live indexing
        assert await memory.recall(scope=user_scope("ada"), query="tea", k=3) == []  # loads, then answers
        assert memory.ready and memory.load_error == ""


async def test_a_failed_background_load_is_tried_again_and_recall_comes_back(tmp_path: Path) -> None:
    """Loading that fails for a passing reason (here: a file where the index directory goes; in the
    field, no descriptors left under a connection flood) leaves the daemon answering without recall
    and is tried again until it works, instead of leaving recall off until a restart."""
    cfg = make_config(tmp_path, identity_links=LINKS)
    blocker = Path(cfg.data_dir) / "qdrant"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a directory")
    gw = Gateway(cfg, entry_points=False, serve_http=False, background_load=True)
    try:
        await gw.start()
        memory = gw.memory
        assert memory is not None
        deadline = time.monotonic() + 30
        while not memory.load_error:
            assert time.monotonic() < deadline, "loading did not fail on the blocked index directory"
            await asyncio.sleep(0.05)
        reply = await gw.handle_inbound(msg("What do I drink in the garden every morning?"))
        assert reply is not None and reply.text  # answered without recall
        assert str(_last_record(gw)["recall_skipped"]).startswith("keyword only (the memory index did not load")
        blocker.unlink()
        while memory.load_error or memory.stats()["backend"] is None:
            assert time.monotonic() < deadline + 30, f"loading was not tried again: {memory.load_error}"
            await asyncio.sleep(0.05)
        await gw.handle_inbound(msg("and the tea?"))
        assert "recall_skipped" not in _last_record(gw) or not _last_record(gw)["recall_skipped"]
    finally:
        await gw.close()
