"""The approval audit as it crosses the storage seam: one row per step of a tool call that waited for a
person's approval (``gateway.approvals``), kept for ``tools.approval_audit_days``.

A row holds when, which approval and person, the tool, the outcome (``OUTCOMES``), a short ``note`` for
a refusal (a fixed phrase, never a plugin's text) and the summary the person was shown: what the call
would do, in the tool's words. That summary is the person's own data (it can name whom a mail goes to),
so ``user_id`` makes ``kith users delete`` erase it with them; the raw tool input and secrets are never
stored. A ``requested`` row *waits* until its approval is answered or expires: ``expire_due`` closes
every waiting row whose time is up and writes its ``expired`` row, whichever process does it first
(a restarted daemon, another node), so an approval nobody answered is still audited as expired.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, get_args

# Every outcome a step can have, in the order a request goes through them (the API's type too).
Outcome = Literal["requested", "approved", "denied", "expired", "refused", "done", "failed", "always allowed"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalEvent:
    at: datetime
    approval_id: str  # the id the person answers (``always`` for a call of an always-allowed tool)
    user_id: str  # whose approval it is
    tool: str
    outcome: str  # one of OUTCOMES
    summary: str = ""  # what the call does, as the person was shown it
    note: str = ""  # why a refusal: "not allowed here", "vetoed by a policy", "another person answered", ...
    entry_id: int = 0  # the row's key once stored (newest is largest); 0 before


class ApprovalAuditStore(Protocol):
    def record(self, event: ApprovalEvent, *, expires_at: datetime | None = None, closes: bool = False) -> bool:
        """Write one step. ``expires_at``: a ``requested`` row, which waits until then. ``closes``: the
        step answers the request (approved, denied, refused after taking it, expired): its waiting row
        closes; an ``expired`` step whose row was already closed (by another sweep) writes nothing and
        answers False."""
        ...

    def expire_due(self, now: datetime) -> list[ApprovalEvent]: ...  # the expired rows written, at their expiry
    def next_expiry(self) -> datetime | None: ...  # the earliest waiting row's expiry
    def page(self, *, user_id: str | None = None, outcome: str | None = None, before: int | None = None,
             limit: int = 50) -> list[ApprovalEvent]: ...  # newest first; ``before``: an entry_id  # fmt: skip
    def merge(self, *, into: str, source: str) -> int: ...  # rows moved to ``into`` (two people merged)
    def prune(self, *, before: datetime, keep: int, limit: int) -> int: ...  # closed rows older, or past ``keep``
