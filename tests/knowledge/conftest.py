from __future__ import annotations

from pathlib import Path

import pytest

from gateway.memory.files.store import MemoryStore


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "users" / "alice")
