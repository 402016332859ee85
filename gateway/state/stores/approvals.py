"""The approval audit (gateway/state/approvals.py): appended to, read newest first, pruned by age and
count. ``user_id`` makes ``kith users delete`` erase a person's rows with the rest."""

from __future__ import annotations

from datetime import datetime

from gateway.state.approvals import ApprovalEvent
from gateway.state.database import Database, Row
from gateway.state.timestamps import parse_ts, ts

_COLUMNS = "id, at, approval_id, user_id, tool, outcome, summary, note"
_INSERT = ("INSERT INTO approval_audit(at, approval_id, user_id, tool, outcome, summary, note, expires_at, waiting)"
           " VALUES (?,?,?,?,?,?,?,?,?)")


def _event(r: Row) -> ApprovalEvent:
    return ApprovalEvent(entry_id=int(r[0]), at=parse_ts(r[1]), approval_id=r[2], user_id=r[3], tool=r[4],
                         outcome=r[5], summary=r[6], note=r[7])  # fmt: skip


class ApprovalAudit:
    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, event: ApprovalEvent, *, expires_at: datetime | None = None, closes: bool = False) -> bool:
        with self._db.tx():
            if closes:
                cur = self._db.run(
                    "UPDATE approval_audit SET waiting=0 WHERE approval_id=? AND user_id=? AND waiting=1",
                    (event.approval_id, event.user_id),
                )
                if cur.rowcount == 0 and event.outcome == "expired":
                    return False  # another sweep audited its expiry already
            self._db.run(_INSERT, (ts(event.at), event.approval_id, event.user_id, event.tool, event.outcome,
                                   event.summary, event.note, ts(expires_at) if expires_at else None,
                                   int(expires_at is not None)))  # fmt: skip
        return True

    def expire_due(self, now: datetime) -> list[ApprovalEvent]:
        with self._db.tx():
            rows = self._db.all(
                "UPDATE approval_audit SET waiting=0 WHERE waiting=1 AND expires_at<=?"
                " RETURNING expires_at, approval_id, user_id, tool, summary", (ts(now),))  # fmt: skip
            rows.sort(key=lambda r: (r[0], r[1]))
            self._db.many(_INSERT, [(r[0], r[1], r[2], r[3], "expired", r[4], "", None, 0) for r in rows])
        return [ApprovalEvent(at=parse_ts(r[0]), approval_id=r[1], user_id=r[2], tool=r[3], outcome="expired",
                              summary=r[4]) for r in rows]  # fmt: skip

    def next_expiry(self) -> datetime | None:
        row = self._db.one("SELECT min(expires_at) FROM approval_audit WHERE waiting=1")
        return parse_ts(row[0]) if row is not None and row[0] else None

    def page(self, *, user_id: str | None = None, outcome: str | None = None, before: int | None = None,
             limit: int = 50) -> list[ApprovalEvent]:  # fmt: skip
        where, args = ["1=1"], []
        for column, value in (("user_id", user_id), ("outcome", outcome)):
            if value is not None:
                where.append(f"{column}=?")
                args.append(value)
        if before is not None:
            where.append("id<?")
            args.append(before)
        rows = self._db.all(f"SELECT {_COLUMNS} FROM approval_audit WHERE {' AND '.join(where)}"
                            " ORDER BY id DESC LIMIT ?", (*args, limit))  # fmt: skip
        return [_event(r) for r in rows]

    def merge(self, *, into: str, source: str) -> int:
        """A merged person's steps become the remaining person's (``kith users delete`` then finds them)."""
        return self._db.run("UPDATE approval_audit SET user_id=? WHERE user_id=?", (into, source)).rowcount

    def prune(self, *, before: datetime, keep: int, limit: int) -> int:
        """Delete up to ``limit`` answered rows older than ``before`` or beyond the newest ``keep``; a
        request still waiting is kept whatever its age (its expiry is still to be audited)."""
        cut = self._db.one("SELECT id FROM approval_audit ORDER BY id DESC LIMIT 1 OFFSET ?", (keep,))
        cur = self._db.run(
            "DELETE FROM approval_audit WHERE id IN (SELECT id FROM approval_audit WHERE waiting=0"
            " AND (at<? OR id<=?) ORDER BY id LIMIT ?)",
            (ts(before), int(cut[0]) if cut is not None else 0, limit),
        )
        return cur.rowcount
