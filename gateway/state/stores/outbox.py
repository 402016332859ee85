"""The delivery outbox and delivery settings (gateway/state/delivery.py)."""

from __future__ import annotations

from datetime import datetime

from gateway.state.database import Database, Row
from gateway.state.delivery import DeliveryPrefs, OutboxEntry
from gateway.state.records import Conversation
from gateway.state.timestamps import parse_ts, ts

_COLUMNS = ("delivery_id, user_id, kind, text, notice, origin, status, due_at, attempts, created_at, sent_at,"
            " channel, detail")


def _entry(r: Row) -> OutboxEntry:
    return OutboxEntry(delivery_id=r[0], user_id=r[1], kind=r[2], text=r[3], notice=bool(r[4]), origin=r[5],
                       status=r[6], due_at=parse_ts(r[7]), attempts=int(r[8]), created_at=parse_ts(r[9]),
                       sent_at=parse_ts(r[10]) if r[10] else None, channel=r[11], detail=r[12])  # fmt: skip


class Outbox:
    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, entry: OutboxEntry) -> OutboxEntry:
        """Insert unless a row with this id exists (a retried caller, a redelivered job): the stored row."""
        with self._db.tx():
            self._db.run(
                f"INSERT INTO outbox({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (entry.delivery_id, entry.user_id, entry.kind, entry.text, int(entry.notice), entry.origin,
                 entry.status, ts(entry.due_at), entry.attempts, ts(entry.created_at),
                 ts(entry.sent_at) if entry.sent_at else None, entry.channel, entry.detail),
            )
            stored = self.get(entry.delivery_id)
        assert stored is not None
        return stored

    def get(self, delivery_id: str) -> OutboxEntry | None:
        row = self._db.one(f"SELECT {_COLUMNS} FROM outbox WHERE delivery_id=?", (delivery_id,))
        return _entry(row) if row else None

    def claim(self, delivery_id: str, *, now: datetime, lease_until: datetime) -> OutboxEntry | None:
        """Take the row for one attempt (pending, or sending with an expired lease): it is ``sending``
        until ``lease_until`` and counts the attempt before anything is sent. None: not claimable."""
        rows = self._db.all(
            "UPDATE outbox SET status='sending', due_at=?, attempts=attempts+1 WHERE delivery_id=?"
            " AND (status='pending' OR (status='sending' AND due_at<=?)) RETURNING " + _COLUMNS,
            (ts(lease_until), delivery_id, ts(now)),
        )
        return _entry(rows[0]) if rows else None

    def take_missed(self, delivery_id: str, *, lease_until: datetime) -> bool:
        """Claim a missed row for one replay (of two tabs connecting at once, one shows it); a crash
        leaves it ``sending`` and the sweep routes it again once the lease ran out."""
        cur = self._db.run("UPDATE outbox SET status='sending', due_at=?, attempts=attempts+1 WHERE delivery_id=?"
                           " AND status='missed'", (ts(lease_until), delivery_id))  # fmt: skip
        return cur.rowcount > 0

    def mark_sent(self, delivery_id: str, *, channel: str, at: datetime) -> bool:
        cur = self._db.run("UPDATE outbox SET status='sent', sent_at=?, channel=?, detail='' WHERE delivery_id=?"
                           " AND status!='sent'", (ts(at), channel, delivery_id))  # fmt: skip
        return cur.rowcount > 0

    def mark_missed(self, delivery_id: str, *, detail: str) -> bool:
        cur = self._db.run("UPDATE outbox SET status='missed', detail=? WHERE delivery_id=? AND status!='sent'",
                           (detail, delivery_id))  # fmt: skip
        return cur.rowcount > 0

    def reschedule(self, delivery_id: str, *, due_at: datetime, detail: str) -> bool:
        cur = self._db.run("UPDATE outbox SET status='pending', due_at=?, detail=? WHERE delivery_id=?"
                           " AND status!='sent'", (ts(due_at), detail, delivery_id))  # fmt: skip
        return cur.rowcount > 0

    def mark_failed(self, delivery_id: str, *, detail: str) -> bool:
        cur = self._db.run("UPDATE outbox SET status='failed', detail=? WHERE delivery_id=? AND status!='sent'",
                           (detail, delivery_id))  # fmt: skip
        return cur.rowcount > 0

    def due(self, now: datetime, *, limit: int = 100) -> list[OutboxEntry]:
        """Pending rows whose time came, and sending rows whose lease ran out (a crashed attempt)."""
        return [_entry(r) for r in self._db.all(
            f"SELECT {_COLUMNS} FROM outbox WHERE status IN ('pending','sending') AND due_at<=?"
            " ORDER BY due_at LIMIT ?", (ts(now), limit))]  # fmt: skip

    def missed_for(self, user_id: str, *, limit: int = 100) -> list[OutboxEntry]:
        return [_entry(r) for r in self._db.all(
            f"SELECT {_COLUMNS} FROM outbox WHERE user_id=? AND status='missed' ORDER BY created_at, delivery_id"
            " LIMIT ?",
            (user_id, limit))]  # fmt: skip

    def list_for(self, user_id: str, *, limit: int = 100) -> list[OutboxEntry]:
        return [_entry(r) for r in self._db.all(
            f"SELECT {_COLUMNS} FROM outbox WHERE user_id=? ORDER BY created_at DESC, delivery_id DESC LIMIT ?",
            (user_id, limit))]  # ties in a fixed order: the same on every backend

    def direct_conversations(self, user_id: str) -> list[Conversation]:
        """The person's one-to-one conversations, most recently seen first (where to reach them)."""
        return [Conversation(conversation_key=r[0], channel=r[1], conversation_id=r[2], kind=r[3], user_id=r[4],
                             persona=r[5], last_seen_at=parse_ts(r[6])) for r in self._db.all(
            "SELECT conversation_key, channel, conversation_id, kind, user_id, persona, last_seen_at"
            " FROM conversations WHERE user_id=? AND kind='dm' ORDER BY last_seen_at DESC LIMIT 50", (user_id,))]

    def counts(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in self._db.all("SELECT status, COUNT(*) FROM outbox GROUP BY status")}

    def prune(self, *, before: datetime, limit: int = 500) -> int:
        """Delete up to ``limit`` sent or failed rows whose last attempt (``due_at``) was before
        ``before``; how many. Pending, sending and missed rows are never deleted."""
        cur = self._db.run(
            "DELETE FROM outbox WHERE delivery_id IN (SELECT delivery_id FROM outbox"
            " WHERE status IN ('sent','failed') AND due_at<? LIMIT ?)", (ts(before), limit))  # fmt: skip
        return max(cur.rowcount, 0)

    def merge(self, *, into: str, source: str) -> None:
        with self._db.tx():
            self._db.run("UPDATE outbox SET user_id=? WHERE user_id=?", (into, source))
            # The kept person's settings win; the merged one's are used only where they had none.
            self._db.run("INSERT INTO delivery_prefs(user_id, preferred_channel, quiet_start, quiet_end,"
                         " notify_conversation) SELECT ?, preferred_channel, quiet_start, quiet_end,"
                         " notify_conversation FROM delivery_prefs WHERE user_id=? ON CONFLICT DO NOTHING",
                         (into, source))  # fmt: skip
            self._db.run("DELETE FROM delivery_prefs WHERE user_id=?", (source,))

    def prefs(self, user_id: str) -> DeliveryPrefs:
        row = self._db.one("SELECT preferred_channel, quiet_start, quiet_end, notify_conversation FROM delivery_prefs"
                           " WHERE user_id=?", (user_id,))  # fmt: skip
        if row is None:
            return DeliveryPrefs()
        return DeliveryPrefs(preferred_channel=row[0], quiet_start=row[1], quiet_end=row[2],
                             notify_conversation=row[3])  # fmt: skip

    def set_prefs(self, user_id: str, prefs: DeliveryPrefs) -> None:
        self._db.run(
            "INSERT INTO delivery_prefs(user_id, preferred_channel, quiet_start, quiet_end, notify_conversation)"
            " VALUES (?,?,?,?,?) ON CONFLICT(user_id) DO UPDATE SET preferred_channel=excluded.preferred_channel,"
            " quiet_start=excluded.quiet_start, quiet_end=excluded.quiet_end,"
            " notify_conversation=excluded.notify_conversation",
            (user_id, prefs.preferred_channel, prefs.quiet_start, prefs.quiet_end, prefs.notify_conversation),
        )
