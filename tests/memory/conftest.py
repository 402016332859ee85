"""Memory fixtures: a real MemoryService (real MiniLM embedder) on either Qdrant backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.configread import parse_config
from gateway.memory.search.service import MemoryService

BACKENDS = ["edge", "memory"]  # embedded qdrant-edge-py / qdrant-client ":memory:"

ServiceFactory = Callable[..., Awaitable[MemoryService]]


def memory_config(data_dir: Path, backend: str, **memory: Any) -> Any:
    mem: dict[str, Any] = dict(memory)
    if backend == "memory":
        mem["qdrant_url"] = ":memory:"
    return parse_config({"data_dir": str(data_dir), "memory": mem}, env={})


@pytest.fixture
async def make_service(tmp_path: Path) -> AsyncIterator[ServiceFactory]:
    started: list[MemoryService] = []

    async def make(backend: str = "edge", data_dir: Path | None = None, **memory: Any) -> MemoryService:
        svc = MemoryService(memory_config(data_dir or tmp_path / "data", backend, **memory))
        await svc.start()
        started.append(svc)
        return svc

    yield make
    for svc in started:
        await svc.close()


@pytest.fixture(params=BACKENDS)
async def service(request: pytest.FixtureRequest, make_service: ServiceFactory) -> MemoryService:
    return await make_service(request.param)
