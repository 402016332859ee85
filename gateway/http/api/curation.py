"""The USER.md curation audit with rollback, the quarantine queue, and the distillation tiers.

Curation runs are read from ``USER.md.audit.jsonl`` (``gateway/memory/curation/audit.py``) and undone
with ``gateway.memory.curation.rollback``, which restores the exact pre-run text and refuses (409)
when the file changed after the run. Quarantined lines (what the poisoning guard held back) are the
operator's to review. Distillation tiers are the files ``MEMORY_SHORT/MID/LONG.md`` with the status
of their last run.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Body, Call, Route
from gateway.memory.background.distill import FILES as DISTILL_FILES
from gateway.memory.background.distill import TIERS
from gateway.memory.curation import audit, rollback
from gateway.memory.files.errors import MemoryStoreError
from gateway.memory.files.quarantine import REL as QUARANTINE
from gateway.memory.files.store import MemoryStore
from gateway.util.jsonl import json_objects

CURATED = "USER.md"


class QuarantinedLine(Answer):
    ts: str
    text: str
    rule: str
    reason: str
    source_type: str
    source_ref: str
    speaker: str
    channel: str
    trust: str


class QuarantineList(Answer):
    lines: list[QuarantinedLine]


class CurationOp(Answer):
    index: int
    op: Any
    outcome: str
    reason: str
    before: Any
    after: Any


class CurationRun(Answer):
    run_id: str
    ts: str
    file: str
    written: bool
    applied: int
    rejected: int
    rolled_back: bool
    ops: list[CurationOp]


class CurationList(Answer):
    runs: list[CurationRun] = Field(description="newest first")


class RollbackBody(Body):
    force: bool = Field(False, description="restore even though the file changed after the run")


class RollbackOut(Answer):
    run_id: str
    status: str
    detail: str


class Tier(Answer):
    tier: str
    file: str
    exists: bool
    size: int
    modified: datetime | None
    status: str = Field(description="the last run: ok, skipped, failed, running...; '' when never run")
    detail: str
    started_at: str | None
    finished_at: str | None


class Tiers(Answer):
    tiers: list[Tier]


def _store(call: Call, uid: str) -> MemoryStore:
    if call.gateway.memory is None:
        raise ApiError(503, "the memory service is not running")
    return call.gateway.memory_store(uid)


def _stamp(value: Any) -> str | None:
    return None if value is None else str(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


async def quarantine(call: Call) -> QuarantineList:
    store = _store(call, call.user_id())

    def read() -> list[dict[str, Any]]:
        return list(json_objects(store.read(QUARANTINE))) if store.exists(QUARANTINE) else []

    records = await asyncio.to_thread(read)
    fields = QuarantinedLine.model_fields
    return QuarantineList(lines=[QuarantinedLine(**{k: _text(r.get(k)) for k in fields}) for r in records])


def runs_of(records: list[dict[str, Any]]) -> list[CurationRun]:
    undone = {r.get("run_id") for r in records if r.get("type") == "rollback"}
    ops: dict[str, list[CurationOp]] = {}
    for r in records:
        if r.get("type") == "op" and isinstance(r.get("run_id"), str):
            ops.setdefault(r["run_id"], []).append(CurationOp(
                index=r.get("index") if isinstance(r.get("index"), int) else -1, op=r.get("op"),
                outcome=_text(r.get("outcome")), reason=_text(r.get("reason")), before=r.get("before"),
                after=r.get("after")))  # fmt: skip
    runs = []
    for r in records:
        if r.get("type") != "run" or not isinstance(r.get("run_id"), str):
            continue
        run_id = r["run_id"]
        runs.append(CurationRun(
            run_id=run_id, ts=_text(r.get("ts")), file=_text(r.get("file")), written=bool(r.get("written")),
            applied=r.get("applied") if isinstance(r.get("applied"), int) else 0,
            rejected=r.get("rejected") if isinstance(r.get("rejected"), int) else 0,
            rolled_back=run_id in undone, ops=ops.get(run_id, [])))  # fmt: skip
    runs.reverse()
    return runs


async def curation(call: Call) -> CurationList:
    store = _store(call, call.user_id())
    records = await asyncio.to_thread(lambda: list(audit.read_records(store, CURATED)))
    return CurationList(runs=runs_of(records))


async def roll_back(call: Call) -> RollbackOut:
    store = _store(call, call.user_id())
    run_id = call.param("id")
    body: RollbackBody = call.body
    if len(run_id) > 128:
        raise ApiError(404, "no such curation run")
    try:
        result = await asyncio.to_thread(rollback, store, run_id, force=body.force)
    except MemoryStoreError as exc:
        raise ApiError(409, str(exc)) from None
    if result.status == "unknown_run":
        raise ApiError(404, "no such curation run")
    if result.status == "conflict":
        raise ApiError(409, result.detail or "USER.md changed after that run; force to restore anyway", code="conflict")
    if result.status == "no_backup":
        raise ApiError(409, result.detail, code="no_backup")
    return RollbackOut(run_id=result.run_id, status=result.status, detail=result.detail)


async def distill(call: Call) -> Tiers:
    uid = call.user_id()
    store = _store(call, uid)
    status = {row["tier"]: row for row in call.gateway.state.distill_runs.status(uid)}

    def scan() -> list[Tier]:
        out = []
        for tier in TIERS:
            rel = DISTILL_FILES[tier]
            try:
                entry = store.stat(rel)
                size, modified = entry.size, datetime.fromtimestamp(entry.mtime, UTC)
            except MemoryStoreError:
                size, modified = 0, None
            row = status.get(tier, {})
            out.append(Tier(tier=tier, file=rel, exists=modified is not None, size=size, modified=modified,
                            status=str(row.get("status") or ""), detail=str(row.get("detail") or ""),
                            started_at=_stamp(row.get("started_at")),
                            finished_at=_stamp(row.get("finished_at"))))  # fmt: skip
        return out

    return Tiers(tiers=await asyncio.to_thread(scan))


ROUTES = [
    Route("GET", "/api/users/{uid}/quarantine", "memory lines the poisoning guard held back (operator)",
          QuarantineList, quarantine, operator=True, tag="curation", errors=(401, 403, 404)),
    Route("GET", "/api/users/{uid}/curation", "USER.md curation runs, newest first", CurationList, curation,
          tag="curation"),
    Route("POST", "/api/users/{uid}/curation/{id}/rollback", "restore USER.md to before a curation run",
          RollbackOut, roll_back, body=RollbackBody, tag="curation", errors=(400, 401, 404, 409)),
    Route("GET", "/api/users/{uid}/distill", "the distillation tiers and their last runs", Tiers, distill,
          tag="curation"),
]
