"""Access tables: the pairing queue, its per-account quota and counters, invites, approvals.

These tables have always stored ISO-8601 text to the second (``2026-01-01T10:00:00+00:00``); callers
pass aware datetimes and get that text back where they show it.
"""

from __future__ import annotations

from datetime import datetime

from gateway.state.database import Database, Row
from gateway.state.interface import Counter
from gateway.state.records import ApprovedAccount, Invite, PairingRequest, QueueStats

_COUNTERS = ("refused", "evicted", "over_quota")  # column names: never taken from outside
_PAIRING = "code, channel, account_id, display_name, created_at, expires_at, requests"


def _iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


def _pairing(r: Row) -> PairingRequest:
    return PairingRequest(code=r[0], channel=r[1], account_id=r[2], display_name=r[3], created_at=r[4],
                          expires_at=r[5], requests=r[6])  # fmt: skip


class Access:
    def __init__(self, db: Database) -> None:
        self._db = db

    # ---------------------------------------------------------------------------------- approvals
    def is_approved(self, channel: str, account_id: str) -> bool:
        row = self._db.one("SELECT 1 FROM access_approved WHERE channel=? AND account_id=?", (channel, account_id))
        return row is not None

    def approve(self, channel: str, account_id: str, *, display_name: str, via: str, at: datetime) -> None:
        """Approve the account (replacing an earlier approval) and drop its pending request."""
        with self._db.atomic():
            self._db.run(
                "INSERT INTO access_approved(channel, account_id, display_name, approved_at, via) VALUES (?,?,?,?,?)"
                " ON CONFLICT(channel, account_id) DO UPDATE SET display_name=excluded.display_name,"
                " approved_at=excluded.approved_at, via=excluded.via",
                (channel, account_id, display_name, _iso(at), via),
            )
            self._db.run("DELETE FROM access_pairing WHERE channel=? AND account_id=?", (channel, account_id))

    def revoke(self, channel: str, account_id: str) -> bool:
        cur = self._db.run("DELETE FROM access_approved WHERE channel=? AND account_id=?", (channel, account_id))
        return cur.rowcount > 0

    def approved(self) -> list[ApprovedAccount]:
        rows = self._db.all(
            "SELECT channel, account_id, display_name, approved_at, via FROM access_approved ORDER BY approved_at"
        )
        return [ApprovedAccount(channel=r[0], account_id=r[1], display_name=r[2], approved_at=r[3], via=r[4])
                for r in rows]  # fmt: skip

    # ------------------------------------------------------------------------------ pairing queue
    def pending(self, now: datetime, channel: str | None = None) -> list[PairingRequest]:
        """Unexpired requests, oldest first (of one channel, or all)."""
        sql = f"SELECT {_PAIRING} FROM access_pairing WHERE expires_at > ?"
        args: tuple[str, ...] = (_iso(now),)
        if channel:
            sql, args = sql + " AND channel=?", (_iso(now), channel)
        return [_pairing(r) for r in self._db.all(sql + " ORDER BY created_at", args)]

    def expire_pairing(self, now: datetime) -> None:
        self._db.run("DELETE FROM access_pairing WHERE expires_at <= ?", (_iso(now),))

    def pairing_of(self, channel: str, account_id: str) -> tuple[str, datetime] | None:
        """(code, last answered) of the account's request, if it has one."""
        row = self._db.one("SELECT code, last_reply_at FROM access_pairing WHERE channel=? AND account_id=?",
                           (channel, account_id))  # fmt: skip
        return (row[0], datetime.fromisoformat(row[1])) if row else None

    def repeat_request(self, code: str, *, answered_at: datetime | None) -> None:
        """Count another message of a waiting sender; ``answered_at`` when it was answered."""
        if answered_at is None:
            self._db.run("UPDATE access_pairing SET requests=requests+1 WHERE code=?", (code,))
        else:
            self._db.run("UPDATE access_pairing SET requests=requests+1, last_reply_at=? WHERE code=?",
                         (_iso(answered_at), code))  # fmt: skip

    def codes_issued(self, channel: str, account_id: str, *, since: datetime) -> int:
        """Codes the account was given after ``since`` (older records are dropped on the way)."""
        self._db.run("DELETE FROM access_pairing_issued WHERE issued_at <= ?", (_iso(since),))
        row = self._db.one("SELECT COUNT(*) FROM access_pairing_issued WHERE channel=? AND account_id=?",
                           (channel, account_id))  # fmt: skip
        return int(row[0]) if row else 0

    def queued(self, channel: str) -> int:
        row = self._db.one("SELECT COUNT(*) FROM access_pairing WHERE channel=?", (channel,))
        return int(row[0]) if row else 0

    def oldest_pairing(self, channel: str) -> tuple[str, datetime] | None:
        """(code, created) of the channel's oldest request."""
        row = self._db.one(
            f"SELECT code, created_at FROM access_pairing WHERE channel=? ORDER BY created_at, {self._db.row_id}"
            " LIMIT 1",
            (channel,),
        )
        return (row[0], datetime.fromisoformat(row[1])) if row else None

    def delete_pairing(self, code: str) -> None:
        self._db.run("DELETE FROM access_pairing WHERE code=?", (code,))

    def add_pairing(self, code: str, *, channel: str, account_id: str, display_name: str, at: datetime,
                    expires_at: datetime) -> None:  # fmt: skip
        """Queue a request and count the code against the account's quota."""
        self._db.run(
            "INSERT INTO access_pairing(code, channel, account_id, display_name, created_at,"
            " expires_at, last_reply_at) VALUES (?,?,?,?,?,?,?)",
            (code, channel, account_id, display_name, _iso(at), _iso(expires_at), _iso(at)),
        )
        self._db.run("INSERT INTO access_pairing_issued(channel, account_id, issued_at) VALUES (?,?,?)",
                     (channel, account_id, _iso(at)))  # fmt: skip

    def take_pairing(self, code: str, now: datetime) -> PairingRequest | None:
        """Remove request ``code``; the request if it was still live."""
        with self._db.atomic():
            row = self._db.one(f"SELECT {_PAIRING} FROM access_pairing WHERE code=? AND expires_at > ?",
                               (code, _iso(now)))  # fmt: skip
            self._db.run("DELETE FROM access_pairing WHERE code=?", (code,))
        return _pairing(row) if row else None

    def count(self, channel: str, counter: Counter, now: datetime, *, window_start: datetime) -> None:
        """Add one to a channel's counter; counters untouched since ``window_start`` start again at 0."""
        if counter not in _COUNTERS:
            raise ValueError(counter)
        self._db.run("INSERT INTO access_pairing_stats(channel, since, last_at) VALUES (?,?,?)"
                     " ON CONFLICT(channel) DO NOTHING", (channel, _iso(now), _iso(now)))  # fmt: skip
        self._db.run("UPDATE access_pairing_stats SET refused=0, evicted=0, over_quota=0, since=?"
                     " WHERE channel=? AND last_at <= ?", (_iso(now), channel, _iso(window_start)))  # fmt: skip
        self._db.run(f"UPDATE access_pairing_stats SET {counter}={counter}+1, last_at=? WHERE channel=?",
                     (_iso(now), channel))  # fmt: skip

    def stats(self, now: datetime, *, since: datetime) -> list[QueueStats]:
        """Per channel with a counter changed after ``since``: requests waiting and the counters."""
        rows = self._db.all(
            "SELECT s.channel, (SELECT COUNT(*) FROM access_pairing p WHERE p.channel=s.channel AND p.expires_at > ?),"
            " s.refused, s.evicted, s.over_quota, s.since, s.last_at FROM access_pairing_stats s WHERE s.last_at > ?"
            " ORDER BY s.channel",
            (_iso(now), _iso(since)),
        )
        return [QueueStats(channel=r[0], pending=r[1], refused=r[2], evicted=r[3], over_quota=r[4], since=r[5],
                           last_at=r[6]) for r in rows]  # fmt: skip

    # ------------------------------------------------------------------------------------ invites
    def add_invite(self, invite: Invite, now: datetime) -> None:
        """Store an invite (and drop expired ones)."""
        with self._db.atomic():
            self._db.run("DELETE FROM access_invites WHERE expires_at <= ?", (_iso(now),))
            self._db.run(
                "INSERT INTO access_invites(code, channel, note, created_at, expires_at) VALUES (?,?,?,?,?)",
                (invite.code, invite.channel, invite.note, invite.created_at, invite.expires_at),
            )

    def invites(self, now: datetime) -> list[Invite]:
        rows = self._db.all(
            "SELECT code, channel, note, created_at, expires_at FROM access_invites WHERE expires_at > ?"
            " ORDER BY created_at",
            (_iso(now),),
        )
        return [Invite(code=r[0], channel=r[1], note=r[2], created_at=r[3], expires_at=r[4]) for r in rows]

    def delete_invite(self, code: str) -> bool:
        return self._db.run("DELETE FROM access_invites WHERE code=?", (code,)).rowcount > 0

    def use_invite(self, code: str, channel: str, now: datetime) -> bool:
        """Consume a live invite valid on ``channel`` (one for any channel counts too)."""
        cur = self._db.run("DELETE FROM access_invites WHERE code=? AND expires_at > ? AND channel IN ('', ?)",
                           (code, _iso(now), channel))  # fmt: skip
        return cur.rowcount == 1
