"""Memory hygiene proposals (``gateway.memory.hygiene``): list them, accept one, reject one.

Person-scoped like every ``/api/users/{uid}`` route: another person's URL is a 404 before anything is
read. Accepting applies exactly the stored changes through the guarded store (audit source
``hygiene:api``) and answers 409 when a file changed since the proposal was made.
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Call, Route
from gateway.memory.hygiene import proposals as stored
from gateway.memory.hygiene.apply import decide
from gateway.memory.hygiene.proposals import Proposal
from gateway.memory.hygiene.run import run_hygiene


class ChangeOut(Answer):
    path: str
    action: str = Field(description="edit, new or delete")
    after: str | None = Field(description="the complete new text; null for a delete")


class ProposalOut(Answer):
    id: str
    number: int = Field(description="its number in /tidy (1-based, pending only; 0 when decided)")
    kind: str = Field(description="merge, conflict, stale, promote or playbook")
    title: str
    detail: str
    created: str
    status: str = Field(description="pending, accepted, rejected or failed")
    decided: str
    reason: str
    changes: list[ChangeOut]


class ProposalList(Answer):
    proposals: list[ProposalOut] = Field(description="pending first, in /tidy order, then recently decided")


class DecisionOut(Answer):
    id: str
    status: str = Field(description="accepted or rejected")
    message: str
    changed: list[str]


class RunOut(Answer):
    added: int
    pending: int
    model: str = Field(description="off, used or failed")


def _out(p: Proposal, number: int) -> ProposalOut:
    changes = [ChangeOut(path=c.path, action="delete" if c.after is None else "new" if not c.before_sha256 else "edit",
                         after=c.after) for c in p.changes]  # fmt: skip
    return ProposalOut(id=p.id, number=number, kind=p.kind, title=p.title, detail=p.detail, created=p.created,
                       status=p.status, decided=p.decided, reason=p.reason, changes=changes)  # fmt: skip


def _uid(call: Call) -> str:
    uid = call.user_id()
    if call.gateway.memory is None:
        raise ApiError(503, "the memory service is not running")
    return uid


async def list_proposals(call: Call) -> ProposalList:
    uid = _uid(call)
    items = await asyncio.to_thread(stored.load, call.gateway.memory_store(uid).root)
    pending = [p for p in items if p.status == "pending"]
    decided = sorted((p for p in items if p.status != "pending"), key=lambda p: p.decided, reverse=True)
    return ProposalList(proposals=[_out(p, i) for i, p in enumerate(pending, 1)] + [_out(p, 0) for p in decided])


async def _decide(call: Call, *, accept: bool) -> DecisionOut:
    uid = _uid(call)
    pid = call.param("id")
    if len(pid) > 64 or pid.isdigit():
        raise ApiError(404, "no such pending proposal")
    result = await decide(call.gateway, uid, pid, accept=accept, actor="api")
    if result.status == "unknown" or result.proposal is None:
        raise ApiError(404, "no such pending proposal")
    if result.status in ("stale", "failed"):
        raise ApiError(409, result.message, code="conflict")
    changed = result.proposal.paths if result.status == "accepted" else []
    return DecisionOut(id=result.proposal.id, status=result.status, message=result.message, changed=changed)


async def accept(call: Call) -> DecisionOut:
    return await _decide(call, accept=True)


async def reject(call: Call) -> DecisionOut:
    return await _decide(call, accept=False)


async def run_now(call: Call) -> RunOut:
    uid = _uid(call)
    report = await run_hygiene(call.gateway, uid)
    return RunOut(added=len(report.added), pending=report.pending, model=report.model)


ROUTES = [
    Route("GET", "/api/users/{uid}/hygiene", "memory tidy-up proposals (pending first)", ProposalList,
          list_proposals, tag="curation"),
    Route("POST", "/api/users/{uid}/hygiene/run", "check the memory for tidy-up proposals now", RunOut, run_now,
          tag="curation", errors=(400, 401, 404, 503)),
    Route("POST", "/api/users/{uid}/hygiene/{id}/accept", "apply a proposal exactly as shown", DecisionOut, accept,
          tag="curation", errors=(400, 401, 404, 409)),
    Route("POST", "/api/users/{uid}/hygiene/{id}/reject", "drop a proposal (it is not proposed again)", DecisionOut,
          reject, tag="curation"),
]
