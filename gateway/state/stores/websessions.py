"""Web sign-in tokens and browser sessions (keyed by hashes; the secrets never reach the database)."""

from __future__ import annotations

from datetime import datetime

from gateway.state.database import Database
from gateway.state.records import SigninGrant, WebSession
from gateway.state.timestamps import parse_ts, ts


class WebSessions:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_signin(self, token_hash: str, *, user_id: str, operator: bool, issued_by: str, at: datetime,
                   expires_at: datetime) -> None:  # fmt: skip
        self._db.run(
            "INSERT INTO web_signin_tokens(token_hash, user_id, operator, issued_by, created_at, expires_at)"
            " VALUES (?,?,?,?,?,?)",
            (token_hash, user_id, int(operator), issued_by, ts(at), ts(expires_at)),
        )

    def take_signin(self, token_hash: str, now: datetime) -> SigninGrant | None:
        """The grant of an unexpired token, deleted in the same statement: of two requests racing with
        one link, exactly one gets it. An expired token is deleted too, and gives None."""
        # all(), not one(): a RETURNING statement left unfinished would hold the write lock.
        rows = self._db.all(
            "DELETE FROM web_signin_tokens WHERE token_hash=? RETURNING user_id, operator, issued_by, expires_at",
            (token_hash,),
        )
        if not rows:
            return None
        row = rows[0]
        expires_at = parse_ts(row[3])
        if expires_at <= now:
            return None
        return SigninGrant(user_id=row[0], operator=bool(row[1]), issued_by=row[2], expires_at=expires_at)

    def create(self, session_hash: str, *, user_id: str, operator: bool, via: str, at: datetime,
               expires_at: datetime) -> None:  # fmt: skip
        self._db.run(
            "INSERT INTO web_sessions(session_hash, user_id, operator, via, created_at, last_seen_at, expires_at)"
            " VALUES (?,?,?,?,?,?,?)",
            (session_hash, user_id, int(operator), via, ts(at), ts(at), ts(expires_at)),
        )

    def get(self, session_hash: str, now: datetime) -> WebSession | None:
        row = self._db.one(
            "SELECT user_id, operator, via, created_at, last_seen_at, expires_at FROM web_sessions"
            " WHERE session_hash=? AND expires_at > ?",
            (session_hash, ts(now)),
        )
        if row is None:
            return None
        return WebSession(user_id=row[0], operator=bool(row[1]), via=row[2], created_at=parse_ts(row[3]),
                          last_seen_at=parse_ts(row[4]), expires_at=parse_ts(row[5]))  # fmt: skip

    def touch(self, session_hash: str, *, at: datetime, expires_at: datetime) -> None:
        self._db.run("UPDATE web_sessions SET last_seen_at=?, expires_at=? WHERE session_hash=?",
                     (ts(at), ts(expires_at), session_hash))  # fmt: skip

    def delete(self, session_hash: str) -> bool:
        return self._db.run("DELETE FROM web_sessions WHERE session_hash=?", (session_hash,)).rowcount > 0

    def revoke_user(self, user_id: str) -> int:
        with self._db.tx():
            n = self._db.run("DELETE FROM web_sessions WHERE user_id=?", (user_id,)).rowcount
            n += self._db.run("DELETE FROM web_signin_tokens WHERE user_id=?", (user_id,)).rowcount
        return n

    def expire(self, now: datetime) -> int:
        with self._db.tx():
            n = self._db.run("DELETE FROM web_sessions WHERE expires_at <= ?", (ts(now),)).rowcount
            n += self._db.run("DELETE FROM web_signin_tokens WHERE expires_at <= ?", (ts(now),)).rowcount
        return n
