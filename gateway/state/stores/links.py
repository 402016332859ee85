"""Link requests (``/link`` codes and the two-sided confirmation)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from gateway.state.database import Database, Row
from gateway.state.records import LinkRequestRecord
from gateway.state.timestamps import parse_ts, ts

_COLUMNS = (
    "code, issuer_user, issuer_channel, issuer_account, issuer_conversation, issuer_name, issuer_token, issuer_ok,"
    " redeemer_user, redeemer_channel, redeemer_account, redeemer_conversation, redeemer_name, redeemer_token,"
    " redeemer_ok, created_at, expires_at"
)
# The confirmation flag of each side: a column name, so never taken from outside this table.
_OK_COLUMN = {"issuer": "issuer_ok", "redeemer": "redeemer_ok"}


def _record(r: Row) -> LinkRequestRecord:
    return LinkRequestRecord(
        code=r[0], issuer_user=r[1], issuer_channel=r[2], issuer_account=r[3], issuer_conversation=r[4],
        issuer_name=r[5], issuer_token=r[6], issuer_ok=bool(r[7]), redeemer_user=r[8], redeemer_channel=r[9],
        redeemer_account=r[10], redeemer_conversation=r[11], redeemer_name=r[12], redeemer_token=r[13],
        redeemer_ok=bool(r[14]), created_at=parse_ts(r[15]), expires_at=parse_ts(r[16]),
    )  # fmt: skip


class LinkRequests:
    def __init__(self, db: Database) -> None:
        self._db = db

    def expire(self, now: datetime) -> None:
        self._db.run("DELETE FROM link_requests WHERE expires_at <= ?", (ts(now),))

    def get(self, code: str, now: datetime) -> LinkRequestRecord | None:
        """The unexpired request ``code`` (redeemed or not)."""
        row = self._db.one(f"SELECT {_COLUMNS} FROM link_requests WHERE code=? AND expires_at > ?", (code, ts(now)))
        return _record(row) if row else None

    def unredeemed(self, code: str, now: datetime) -> LinkRequestRecord | None:
        row = self._db.one(
            f"SELECT {_COLUMNS} FROM link_requests WHERE code=? AND redeemer_account IS NULL AND expires_at > ?",
            (code, ts(now)),
        )
        return _record(row) if row else None

    def involving(self, channel: str, account_id: str, now: datetime) -> list[LinkRequestRecord]:
        """Redeemed, unexpired requests with this account on either side, newest first."""
        rows = self._db.all(
            f"SELECT {_COLUMNS} FROM link_requests WHERE redeemer_account IS NOT NULL AND expires_at > ? AND"
            " ((issuer_channel=? AND issuer_account=?) OR (redeemer_channel=? AND redeemer_account=?))"
            " ORDER BY created_at DESC",
            (ts(now), channel, account_id, channel, account_id),
        )
        return [_record(r) for r in rows]

    def of_account(self, channel: str, account_id: str) -> list[LinkRequestRecord]:
        """Every request (expired ones too) with this account on either side."""
        rows = self._db.all(
            f"SELECT {_COLUMNS} FROM link_requests WHERE (issuer_channel=? AND issuer_account=?)"
            " OR (redeemer_channel=? AND redeemer_account=?)",
            (channel, account_id, channel, account_id),
        )
        return [_record(r) for r in rows]

    def create(self, code: str, *, user_id: str, channel: str, account_id: str, conversation_id: str, name: str,
               at: datetime, expires_at: datetime) -> None:  # fmt: skip
        self._db.run(
            "INSERT INTO link_requests(code, issuer_user, issuer_channel, issuer_account, issuer_conversation,"
            " issuer_name, created_at, expires_at) VALUES (?,?,?,?,?,?,?,?)",
            (code, user_id, channel, account_id, conversation_id, name, ts(at), ts(expires_at)),
        )

    def drop_unredeemed_of(self, user_id: str) -> None:
        """Drop the user's codes nobody has redeemed yet."""
        self._db.run("DELETE FROM link_requests WHERE issuer_user=? AND redeemer_account IS NULL", (user_id,))

    def drop_redeemed_by(self, channel: str, account_id: str) -> None:
        self._db.run("DELETE FROM link_requests WHERE redeemer_channel=? AND redeemer_account=?",
                     (channel, account_id))  # fmt: skip

    def delete(self, code: str) -> None:
        self._db.run("DELETE FROM link_requests WHERE code=?", (code,))

    def redeem(self, code: str, *, user_id: str | None, channel: str, account_id: str, conversation_id: str,
               name: str, redeemer_token: str, issuer_token: str, expires_at: datetime) -> bool:  # fmt: skip
        """Fill in the redeeming side of an unredeemed code; False when it was redeemed meanwhile."""
        cur = self._db.run(
            "UPDATE link_requests SET redeemer_user=?, redeemer_channel=?, redeemer_account=?,"
            " redeemer_conversation=?, redeemer_name=?, redeemer_token=?, issuer_token=?, expires_at=?"
            " WHERE code=? AND redeemer_account IS NULL",
            (user_id, channel, account_id, conversation_id, name, redeemer_token, issuer_token, ts(expires_at),
             code),
        )  # fmt: skip
        return cur.rowcount == 1

    def confirm(self, code: str, side: Literal["issuer", "redeemer"]) -> None:
        self._db.run(f"UPDATE link_requests SET {_OK_COLUMN[side]}=1 WHERE code=?", (code,))
