"""The operator's memory index: what it holds, and rebuilding it.

``kith memory stats`` and ``kith memory reindex`` ask these while a daemon holds the embedded index
(gateway/cli/memory.py). A rebuild runs as ``memory.rebuild`` jobs on the daemon's bus, one per
scope; the answer (202) names the scopes queued.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from gateway.http.api.spec import Answer, ApiError, Body, Call, Route
from gateway.memory.files.scopes import ScopeError, user_scope


class IndexStats(Answer):
    model_config = ConfigDict(extra="allow")
    backend: str | None = Field(description="the vector index in use (null: not loaded yet)")
    embedding_model: str
    points: int
    queued: int = Field(description="index jobs waiting in this process")
    paused: bool = Field(description="indexing paused (disk space below the floor)")
    scopes: dict[str, dict[str, Any]] = Field(description="per scope (users/<id>, channels/...): files, bytes, points")


class ReindexBody(Body):
    user: str | None = Field(None, min_length=1, max_length=200, description="one person; absent: every scope")


class Queued(Answer):
    queued: list[str] = Field(description="the scopes whose rebuild was queued")


def memory(call: Call) -> Any:
    """The memory service of a process that holds the index; 503 in one that does not."""
    found = call.gateway.memory
    if found is None or found.detached:
        raise ApiError(503, "this process has no memory index")
    return found


async def stats(call: Call) -> IndexStats:
    return IndexStats.model_validate(await memory(call).report())


async def reindex(call: Call) -> Queued:
    body: ReindexBody = call.body
    mem, bus = memory(call), call.gateway.bus
    if bus is None:
        raise ApiError(503, "the job bus is not running")
    try:
        # A person's folder, whether or not the users table still knows them (files copied in, an
        # erase whose index step failed): the scope names the folder, as `kith memory reindex` does.
        scopes = [user_scope(body.user)] if body.user else mem.stores.known_scopes()
        for scope in scopes:
            mem.stores.root_for(scope)
    except ScopeError as exc:
        raise ApiError(400, str(exc)) from None
    for scope in scopes:
        await bus.enqueue("memory.rebuild", {"scope": scope})
    return Queued(queued=scopes)


ERRORS = (401, 403, 503)
ROUTES = [
    Route("GET", "/api/memory/stats", "the memory index: backend, model, points, and each scope's files (operator)",
          IndexStats, stats, operator=True, tag="operator", errors=ERRORS),
    Route("POST", "/api/memory/reindex", "rebuild the memory index of one person or of every scope (operator)",
          Queued, reindex, body=ReindexBody, operator=True, status=202, tag="operator", errors=(400, *ERRORS)),
]
