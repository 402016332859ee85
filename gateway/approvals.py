"""Pending approvals of tool calls that act on the world (``Tool.needs_approval``), and their audit.

When the model calls such a tool, the runner (``gateway.tools``) does not run it: it checks the input
(the tool's ``preview``), records a ``Pending`` here with what exactly will happen, and tells the model
to ask the person. Only that person can answer (``/approve ID`` or ``/deny ID``, ``plugins.tools.approvals``),
and only before it expires; the call then runs with the approving turn's gates checked again.

A person may make a tool "always allowed" for themselves (``/approve ID always``): its calls then run
without asking, each audited as ``always allowed``; ``/approve never TOOL`` asks again. The list is
theirs alone, in ``<data_dir>/users/<id>/.approvals.json`` (a dot name: no memory tool reads it).

Every step (requested, approved, denied, expired, refused, done, failed) is one audit entry: a log line
on ``kith.tools.audit`` (ids and tool names, never the input, which can hold personal data) and a
bounded in-memory list the console and tests read. Pending approvals live in the daemon's memory: a
restart drops them, which is the same as letting them expire.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.types import StashKey

audit_log = logging.getLogger("kith.tools.audit")

MAX_PENDING_PER_USER = 20
MAX_AUDIT = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    approval_id: str
    user_id: str
    tool: str
    args: Mapping[str, Any]
    summary: str  # what will happen, as the person is shown it
    expires_at: float  # time.monotonic()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    at: float  # time.time()
    approval_id: str
    user_id: str
    tool: str
    outcome: str
    summary: str = ""


@dataclass
class Approvals:
    """The gateway's pending approvals (``gateway.stash[APPROVALS]``)."""

    ttl_s: float = 600.0
    _pending: dict[str, Pending] = field(default_factory=dict)
    audit: deque[AuditEntry] = field(default_factory=lambda: deque(maxlen=MAX_AUDIT))

    def record(self, p: Pending, outcome: str) -> None:
        self.audit.append(AuditEntry(at=time.time(), approval_id=p.approval_id, user_id=p.user_id, tool=p.tool,
                                     outcome=outcome, summary=p.summary))
        audit_log.info("approval %s user=%s tool=%s %s", p.approval_id, p.user_id, p.tool, outcome)

    def request(self, *, user_id: str, tool: str, args: Mapping[str, Any], summary: str) -> Pending:
        self._expire()
        mine = sorted((p for p in self._pending.values() if p.user_id == user_id), key=lambda p: p.expires_at)
        for old in mine[: max(0, len(mine) - MAX_PENDING_PER_USER + 1)]:
            self._drop(old, "expired")
        p = Pending(approval_id=secrets.token_hex(3), user_id=user_id, tool=tool, args=dict(args), summary=summary,
                    expires_at=time.monotonic() + self.ttl_s)
        self._pending[p.approval_id] = p
        self.record(p, "requested")
        return p

    def take(self, approval_id: str, user_id: str) -> tuple[Pending | None, str]:
        """The pending call ``user_id`` answers, removed; or (None, why not). Another person's id is
        answered exactly like an unknown one: nobody learns which ids exist."""
        self._expire()
        p = self._pending.get(approval_id.strip().lower())
        if p is None or p.user_id != user_id:
            return None, f"no pending approval {approval_id!r} (it may have expired)"
        del self._pending[p.approval_id]
        return p, ""

    def pending_for(self, user_id: str) -> list[Pending]:
        self._expire()
        return [p for p in self._pending.values() if p.user_id == user_id]

    def _drop(self, p: Pending, outcome: str) -> None:
        self._pending.pop(p.approval_id, None)
        self.record(p, outcome)

    def _expire(self) -> None:
        now = time.monotonic()
        for p in [p for p in self._pending.values() if p.expires_at <= now]:
            self._drop(p, "expired")


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
