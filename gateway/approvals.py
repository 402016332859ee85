"""Pending approvals of tool calls that act on the world (``Tool.needs_approval``), and their audit.

When the model calls such a tool, the runner (``gateway.tools``) does not run it: it checks the input
(the tool's ``preview``), records a ``Pending`` here with what exactly will happen, and tells the model
to ask the person. Only that person can answer (``/approve ID`` or ``/deny ID``, ``plugins.tools.approvals``),
and only before it expires; the call then runs with the approving turn's gates checked again.

A person may make a tool "always allowed" for themselves (``/approve ID always``): its calls then run
without asking, each audited as ``always allowed``; ``/approve never TOOL`` asks again. The list is
theirs alone, in ``<data_dir>/users/<id>/.approvals.json`` (a dot name: no memory tool reads it).

Every step (requested, approved, denied, expired, refused, done, failed, always allowed) is one row of
the approval audit in the state database (``State.approval_audit``, gateway/state/approvals.py: the
summary the person was shown, never the tool's input) and a log line on ``kith.tools.audit`` (ids and
tool names only). Another person answering someone's approval id is refused and audited under the
owner (the answer they get is the one for an unknown id). Expiry does not wait for anyone to answer: a
timer expires what is due and audits it, and ``sweep`` audits what expired while no daemon ran (the
audit rows remember each request's expiry; pending calls themselves live in the daemon's memory, so a
restart drops them, which is the same as letting them expire). The audit keeps
``tools.approval_audit_days`` days and at most ``MAX_AUDIT_ROWS`` rows.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.state.approvals import ApprovalAuditStore, ApprovalEvent
from gateway.types import StashKey

audit_log = logging.getLogger("kith.tools.audit")
log = logging.getLogger("kith.tools")

MAX_PENDING_PER_USER = 20
MAX_AUDIT = 1000  # steps ``Approvals.audit`` shows (newest); a book without a store keeps only these
MAX_AUDIT_ROWS = 100_000  # the stored audit's cap, whatever its age (a flood of requests cannot fill the disk)
PRUNE_EVERY = 200  # steps written between two prunes
PRUNE_BATCH = 500
# The outcomes that answer a request still waiting, when recorded after it left the pending list.
ANSWERS = ("approved", "denied", "expired", "refused")

AuditEntry = ApprovalEvent  # what ``Approvals.audit`` lists


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    approval_id: str
    user_id: str
    tool: str
    args: Mapping[str, Any]
    summary: str  # what will happen, as the person is shown it
    expires_at: float  # time.time()


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


@dataclass
class Approvals:
    """The gateway's pending approvals (``gateway.stash[APPROVALS]``), auditing into ``store``."""

    ttl_s: float = 600.0
    store: ApprovalAuditStore | None = None  # None: the steps are kept in memory only (a book on its own)
    retention_days: float = 90.0
    _pending: dict[str, Pending] = field(default_factory=dict)
    _recent: deque[ApprovalEvent] = field(default_factory=lambda: deque(maxlen=MAX_AUDIT))
    _timer: asyncio.TimerHandle | None = None
    _written: int = 0

    @property
    def audit(self) -> list[ApprovalEvent]:
        """The latest steps, oldest first: read back from the store (every process's), else this book's."""
        if self.store is None:
            return list(self._recent)
        return self.store.page(limit=MAX_AUDIT)[::-1]

    def record(self, p: Pending, outcome: str, *, note: str = "", by: str = "") -> None:
        """Audit one step of ``p``. A step that answers it (``ANSWERS``, once it left the pending list)
        closes its waiting row; an expiry another process audited first is not written twice."""
        event = ApprovalEvent(at=datetime.now(UTC), approval_id=p.approval_id, user_id=p.user_id, tool=p.tool,
                              outcome=outcome, summary=p.summary, note=note)  # fmt: skip
        closes = outcome in ANSWERS and p.approval_id not in self._pending
        if self.store is None:
            self._recent.append(event)
        elif not self.store.record(event, expires_at=_at(p.expires_at) if outcome == "requested" else None,
                                   closes=closes):  # fmt: skip
            return
        audit_log.info("approval %s user=%s tool=%s %s%s%s", p.approval_id, p.user_id, p.tool, outcome,
                       f" ({note})" if note else "", f" by={by}" if by else "")  # fmt: skip
        self._written += 1
        if self._written % PRUNE_EVERY == 0:
            self.prune()

    def request(self, *, user_id: str, tool: str, args: Mapping[str, Any], summary: str) -> Pending:
        self._expire()
        mine = sorted((p for p in self._pending.values() if p.user_id == user_id), key=lambda p: p.expires_at)
        for old in mine[: max(0, len(mine) - MAX_PENDING_PER_USER + 1)]:
            self._drop(old, "expired", note=f"more than {MAX_PENDING_PER_USER} were waiting")
        p = Pending(approval_id=secrets.token_hex(3), user_id=user_id, tool=tool, args=dict(args), summary=summary,
                    expires_at=time.time() + self.ttl_s)
        self._pending[p.approval_id] = p
        self.record(p, "requested")
        self._arm()
        return p

    def take(self, approval_id: str, user_id: str) -> tuple[Pending | None, str]:
        """The pending call ``user_id`` answers, removed; or (None, why not). Another person's id is
        answered exactly like an unknown one: nobody learns which ids exist (the audit does)."""
        self._expire()
        p = self._pending.get(approval_id.strip().lower())
        if p is not None and p.user_id != user_id:
            self.record(p, "refused", note="another person answered", by=user_id)
        if p is None or p.user_id != user_id:
            return None, f"no pending approval {approval_id!r} (it may have expired)"
        del self._pending[p.approval_id]
        return p, ""

    def pending_for(self, user_id: str) -> list[Pending]:
        self._expire()
        return [p for p in self._pending.values() if p.user_id == user_id]

    def expire(self) -> None:
        """Audit what has expired now (the audit's readers call it: nothing shows as waiting past its time)."""
        self._expire()

    def sweep(self) -> None:
        """Audit what expired (here, or while no daemon ran, or on another node), prune, and set the
        timer for the next expiry: the daemon's start and the audit's readers call it."""
        self._expire()
        self.prune()
        self._arm()

    def prune(self) -> int:
        if self.store is None:
            return 0
        before = datetime.now(UTC) - timedelta(days=self.retention_days)
        return self.store.prune(before=before, keep=MAX_AUDIT_ROWS, limit=PRUNE_BATCH)

    def close(self) -> None:
        """Stop the expiry timer (the daemon's shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _drop(self, p: Pending, outcome: str, *, note: str = "") -> None:
        self._pending.pop(p.approval_id, None)
        self.record(p, outcome, note=note)

    def _expire(self) -> None:
        now = time.time()
        for p in [p for p in self._pending.values() if p.expires_at <= now]:
            self._drop(p, "expired")
        if self.store is not None:  # waiting rows no pending call of this process stands for
            for e in self.store.expire_due(_at(now)):
                audit_log.info("approval %s user=%s tool=%s expired", e.approval_id, e.user_id, e.tool)

    def _arm(self) -> None:
        """One timer, at the next expiry (in memory, or of a stored waiting row): an approval nobody
        answers is audited as expired when its time is up, not when someone next looks."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a book used outside the daemon: expiry is checked on every use
            return
        due = [p.expires_at for p in self._pending.values()]
        stored = self.store.next_expiry() if self.store is not None else None
        if stored is not None:
            due.append(stored.timestamp())
        self.close()
        if due:
            self._timer = loop.call_later(max(0.0, min(due) - time.time()) + 0.01, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self._expire()
            self._arm()
        except Exception:
            log.exception("approvals: auditing the expired approvals failed; the next use tries again")


APPROVALS = StashKey[Approvals]()

ALWAYS_FILE = ".approvals.json"
MAX_ALWAYS = 100
_USER = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def _always_path(data_dir: Path, user_id: str) -> Path:
    if not _USER.match(user_id):
        raise ValueError("bad user id")
    return Path(data_dir) / "users" / user_id / ALWAYS_FILE


def always_allowed(data_dir: Path, user_id: str) -> set[str]:
    """The tools ``user_id`` made always allowed (a broken file is an empty list: ask again)."""
    try:
        data = json.loads(_always_path(data_dir, user_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    tools = data.get("always") if isinstance(data, dict) else None
    return {t for t in tools if isinstance(t, str)} if isinstance(tools, list) else set()


def set_always(data_dir: Path, user_id: str, tool: str, allowed: bool) -> bool:
    """Add (or remove) ``tool`` to ``user_id``'s always allowed tools; False if nothing changed."""
    tools = always_allowed(data_dir, user_id)
    if (tool in tools) == allowed or (allowed and len(tools) >= MAX_ALWAYS):
        return False
    tools = tools | {tool} if allowed else tools - {tool}
    path = _always_path(data_dir, user_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"always": sorted(tools)}), encoding="utf-8")
    os.replace(tmp, path)
    audit_log.info("user=%s tool=%s always allowed: %s", user_id, tool, "yes" if allowed else "no")
    return True
