"""Seed 004: when the embedder or the vector index cannot load, recall degrades to keyword search (BM25
over the files) instead of turning off, and says so ("keyword only")."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.cli.context import render
from gateway.memory.files.stores import Stores
from gateway.memory.search.keyword import KeywordSearch
from gateway.turn.explain import explain
from tests.conftest import make_config
from tests.fakes.anthropic import FakeAnthropic
from tests.memory_stages.conftest import last_turn_system, msg

LINKS = [{"user": "ada", "accounts": ["websocket:ada"]}]


def test_bm25_ranks_the_files_of_the_named_scopes_only(tmp_path: Path) -> None:
    stores = Stores(tmp_path, max_file_bytes=256 * 1024)
    ada, bo = stores.for_user("ada"), stores.for_user("bo")
    ada.write("topics/tea.md", "# Tea\n\nAda drinks lapsang souchong every morning in the garden.\n", source="t")
    ada.write("topics/boats.md", "# Boats\n\nAda sails a dinghy near Cowes; the boat is called Petrel.\n", source="t")
    ada.write("notes.md", "The garden needs weeding. The garden shed is blue.\n", source="t")
    ada.write("tea.audit.jsonl", "lapsang lapsang lapsang\n", source="t")  # not indexable
    bo.write("topics/tea.md", "# Tea\n\nBo drinks lapsang souchong too.\n", source="t")
    search = KeywordSearch(stores)
    hits = search.search(scopes=["user:ada"], query="Which tea do I drink, lapsang?", k=3)
    assert hits[0].source == "topics/tea.md" and {h.scope for h in hits} == {"user:ada"}
    assert [h.source for h in search.search(scopes=["user:ada"], query="sailing boats", k=3)] == ["topics/boats.md"]
    assert search.search(scopes=["user:ada"], query="the and of", k=3) == []  # stop words only
    ada.write("topics/boats.md", "# Boats\n\nSold the dinghy.\n", source="t")  # a changed file is re-read
    assert search.search(scopes=["user:ada"], query="Petrel", k=3) == []


async def test_an_index_that_cannot_be_opened_leaves_recall_on_keywords_and_context_says_so(
    tmp_path: Path, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    cfg = make_config(tmp_path, llm=anthropic_llm, identity_links=LINKS)
    blocker = Path(cfg.data_dir) / "qdrant"  # the index directory: a file there cannot be opened
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
        assert memory.keyword_only
        await gw.handle_inbound(msg("My boat is a blue dinghy called Petrel, moored at Cowes."))
        store = gw.memory_store("ada")
        while not any("Petrel" in store.read(f.path) for f in store.files("sessions")):
            assert time.monotonic() < deadline, "the turn did not reach the session log"
            await asyncio.sleep(0.05)
        await gw.handle_inbound(msg("/new"))
        await gw.handle_inbound(msg("What is my boat called?"))
        system = last_turn_system(fake_anthropic)
        assert "--- Recalled memories" in system and "called Petrel" in system.split("--- Recalled memories")[1]
        seen = await explain(gw, user_id="ada", channel="websocket", text="and where is the boat moored?")
        assert str(seen["recall_skipped"]).startswith("keyword only (the memory index did not load")
        assert "recall: keyword only (the memory index did not load" in render(seen)
        assert any("keyword only" in p for p in memory.health_problems())
    finally:
        await gw.close()


def test_keyword_search_narrows_like_the_index(tmp_path: Path) -> None:
    from gateway.memory.search.index import narrowing

    stores = Stores(tmp_path, max_file_bytes=256 * 1024)
    ada = stores.for_user("ada")
    ada.write("memories/2024-05-01.md", "# M\n\n## Night\nTopics: sailing\nEntities: Petrel\n\n- Sailed the boat.\n",
              source="t")
    ada.write("memories/2024-05-03.md", "# M\n\n## Night\nTopics: repairs\n\n- Fixed the boat.\n", source="t")
    search = KeywordSearch(stores)

    def found(**kw: str) -> list[str]:
        return [h.source for h in search.search(scopes=["user:ada"], query="boat", k=5, narrow=narrowing(**kw))]

    assert sorted(found()) == ["memories/2024-05-01.md", "memories/2024-05-03.md"]
    assert found(topic="sailing") == found(entity="petrel") == ["memories/2024-05-01.md"]
    assert found(since="2024-05-02") == ["memories/2024-05-03.md"]
