"""The approval audit (issue 32): every step of a tool call that waited for a person's approval
(``gateway.approvals``), newest first, a page at a time.

The operator reads everyone's (``GET /api/approvals``, filterable by person and outcome: the console's
"Approvals" view); a person reads their own (``GET /api/users/me/approvals``; another person's id is a
404, as on every person route). An entry holds the summary the person was shown (what the call would
do), never the tool's input. Reading first audits what has expired, so a request nobody answered never
shows as still waiting.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from gateway.http.api.spec import Answer, Call, Query, Route
from gateway.state.approvals import ApprovalEvent, Outcome
from gateway.tools import approvals


class Entry(Answer):
    id: int = Field(description="the entry's key: newer entries have larger ones")
    at: datetime
    approval_id: str = Field(description="the id the person answers; 'always' for an always-allowed tool's call")
    user_id: str
    display_name: str = Field(description="the person's name now ('' once they are gone)")
    tool: str
    outcome: str = Field(description="requested, approved, denied, expired, refused, done, failed or always allowed")
    summary: str = Field(description="what the call does, as the person was shown it (never the tool's input)")
    note: str = Field(description="why it was refused, when it was")


class Entries(Answer):
    entries: list[Entry] = Field(description="newest first")
    next_before: int | None = Field(description="more entries exist: ask again with before=this; null: the last page")


class PersonQuery(Query):
    outcome: Outcome | None = None
    before: int | None = Field(None, ge=1, le=2**62, description="entries older than this id (a page's next_before)")
    limit: int = Field(50, ge=1, le=200)


class AuditQuery(PersonQuery):
    user: str | None = Field(None, min_length=1, max_length=128, description="one person's entries (a user id)")


def _page(call: Call, user_id: str | None, query: PersonQuery) -> Entries:
    gw = call.gateway
    approvals(gw).expire()
    found = gw.state.approval_audit.page(user_id=user_id, outcome=query.outcome, before=query.before,
                                         limit=query.limit + 1)  # fmt: skip
    more = len(found) > query.limit
    found = found[: query.limit]
    names: dict[str, str] = {}
    for uid in {e.user_id for e in found}:
        user = gw.state.users.get(uid)
        names[uid] = user.display_name if user is not None else ""
    return Entries(entries=[_entry(e, names[e.user_id]) for e in found],
                   next_before=found[-1].entry_id if more else None)  # fmt: skip


def _entry(e: ApprovalEvent, name: str) -> Entry:
    return Entry(id=e.entry_id, at=e.at, approval_id=e.approval_id, user_id=e.user_id, display_name=name, tool=e.tool,
                 outcome=e.outcome, summary=e.summary, note=e.note)  # fmt: skip


async def every_entry(call: Call) -> Entries:
    query: AuditQuery = call.query
    return _page(call, query.user, query)


async def own_entries(call: Call) -> Entries:
    return _page(call, call.user_id(), call.query)


ROUTES = [
    Route("GET", "/api/approvals", "the approval audit: every step of every approval, newest first", Entries,
          every_entry, query=AuditQuery, operator=True, tag="operator", errors=(400, 401, 403),
          description="Filter by user and outcome; page with before=next_before. Retention: "
                      "tools.approval_audit_days (docs/tools.md#approvals)."),
    Route("GET", "/api/users/{uid}/approvals", "a person's own approval audit, newest first", Entries, own_entries,
          query=PersonQuery, tag="me",
          description="Only the person themselves (uid me) or the operator."),
]
