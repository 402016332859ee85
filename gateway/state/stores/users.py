"""Users and identities: (channel, account id) -> user id, user merges, the cron directory."""

from __future__ import annotations

from datetime import datetime

from gateway.state.database import Database, Row
from gateway.state.records import Account, User
from gateway.state.timestamps import parse_ts, ts

_USER = "user_id, display_name, timezone, created_at, tier"


def _user(r: Row) -> User:
    return User(user_id=r[0], display_name=r[1], timezone=r[2], created_at=parse_ts(r[3]), tier=r[4])


class Users:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, user_id: str) -> User | None:
        r = self._db.one(f"SELECT {_USER} FROM users WHERE user_id=?", (user_id,))
        return _user(r) if r else None

    def all(self) -> list[User]:
        return [_user(r) for r in self._db.all(f"SELECT {_USER} FROM users ORDER BY user_id")]

    def create(self, user_id: str, *, display_name: str, timezone: str, at: datetime | None = None) -> None:
        self._db.run("INSERT INTO users(user_id, display_name, timezone, created_at) VALUES (?,?,?,?)",
                     (user_id, display_name, timezone, ts(at)))  # fmt: skip

    def ensure(self, user_id: str, *, display_name: str, timezone: str, at: datetime | None = None) -> None:
        """Create the user unless it exists (an existing user is left as it is)."""
        self._db.run("INSERT INTO users(user_id, display_name, timezone, created_at) VALUES (?,?,?,?)"
                     " ON CONFLICT DO NOTHING",
                     (user_id, display_name, timezone, ts(at)))  # fmt: skip

    def names(self, user_id: str) -> tuple[str, ...]:
        """Every non-empty display name the user is known by (their own and their accounts')."""
        rows = self._db.all(
            "SELECT display_name FROM users WHERE user_id=? UNION SELECT display_name FROM identities WHERE user_id=?",
            (user_id, user_id),
        )
        return tuple(dict.fromkeys(str(r[0]) for r in rows if r[0]))

    def merge(self, *, into: str, source: str) -> None:
        """Move every row of user ``source`` (accounts, sessions and their scope, transcript,
        conversations) to ``into``, drop its open link requests, and delete it; one transaction."""
        with self._db.tx():
            for table in ("identities", "sessions", "turns"):
                self._db.run(f"UPDATE {table} SET user_id=? WHERE user_id=?", (into, source))
            self._db.run("UPDATE sessions SET scope_key=? WHERE scope_key=?", (f"user:{into}", f"user:{source}"))
            self._db.run("UPDATE conversations SET user_id=? WHERE user_id=?", (into, source))
            self._db.run("UPDATE turn_contexts SET user_id=? WHERE user_id=?", (into, source))
            self._db.run("DELETE FROM link_requests WHERE issuer_user=? OR redeemer_user=?", (source, source))
            # A browser signed in as the merged user is signed out, not silently moved to ``into``.
            self._db.run("DELETE FROM web_sessions WHERE user_id=?", (source,))
            self._db.run("DELETE FROM web_signin_tokens WHERE user_id=?", (source,))
            # API keys keep working: they now speak for the person the accounts moved to.
            self._db.run("UPDATE api_keys SET user_id=? WHERE user_id=?", (into, source))
            self._db.run("DELETE FROM users WHERE user_id=?", (source,))

    # A person's settings (gateway/http/api/me.py validates them).
    def set_display_name(self, user_id: str, display_name: str) -> bool:
        return self._db.run("UPDATE users SET display_name=? WHERE user_id=?", (display_name, user_id)).rowcount == 1

    def set_timezone(self, user_id: str, timezone: str) -> bool:
        return self._db.run("UPDATE users SET timezone=? WHERE user_id=?", (timezone, user_id)).rowcount == 1

    def set_tier(self, user_id: str, tier: int | None) -> bool:
        return self._db.run("UPDATE users SET tier=? WHERE user_id=?", (tier, user_id)).rowcount == 1

    # The cron scheduler's reads (gateway/bus/cronusers.py): each costs index seeks, not a scan.
    def user_timezones(self) -> list[str]:
        """Distinct timezones, skipping through the index: one seek per zone however many users."""
        rows = self._db.all(
            "WITH RECURSIVE z(tz) AS (SELECT min(timezone) FROM users UNION ALL"
            " SELECT (SELECT min(timezone) FROM users WHERE timezone > z.tz) FROM z WHERE z.tz IS NOT NULL)"
            " SELECT tz FROM z WHERE tz IS NOT NULL"
        )
        return [r[0] for r in rows]

    def users_in_timezone(self, timezone: str, *, after: str = "", limit: int = 500) -> list[str]:
        rows = self._db.all("SELECT user_id FROM users WHERE timezone=? AND user_id>? ORDER BY user_id LIMIT ?",
                            (timezone, after, limit))  # fmt: skip
        return [r[0] for r in rows]

    def users_added_since(self, position: tuple[str, str], *, limit: int = 500) -> list[tuple[tuple[str, str], str]]:
        """((created_at, user_id), timezone) of users created after ``position``, oldest first."""
        rows = self._db.all("SELECT created_at, user_id, timezone FROM users WHERE (created_at, user_id) > (?, ?)"
                            " ORDER BY created_at, user_id LIMIT ?", (position[0], position[1], limit))  # fmt: skip
        return [((r[0], r[1]), r[2]) for r in rows]

    def newest_user_position(self) -> tuple[str, str]:
        row = self._db.one("SELECT created_at, user_id FROM users ORDER BY created_at DESC, user_id DESC LIMIT 1")
        return (row[0], row[1]) if row else ("", "")


class Identities:
    def __init__(self, db: Database) -> None:
        self._db = db

    def lookup(self, channel: str, account_id: str) -> str | None:
        row = self._db.one("SELECT user_id FROM identities WHERE channel=? AND account_id=?", (channel, account_id))
        return row[0] if row else None

    def lookup_user(self, channel: str, account_id: str) -> tuple[str, User | None] | None:
        """``lookup`` and the user's row in one statement (every turn resolves its sender):
        None for an unknown account, ``(user id, None)`` for an account whose user row is missing."""
        row = self._db.one(
            "SELECT i.user_id, u.user_id, u.display_name, u.timezone, u.created_at, u.tier FROM identities i"
            " LEFT JOIN users u ON u.user_id = i.user_id WHERE i.channel=? AND i.account_id=?",
            (channel, account_id),
        )
        if row is None:
            return None
        return row[0], (_user(row[1:]) if row[1] is not None else None)

    def add(self, channel: str, account_id: str, user_id: str, *, display_name: str = "", source: str,
            at: datetime | None = None) -> None:  # fmt: skip
        self._db.run(
            "INSERT INTO identities(channel, account_id, user_id, display_name, source, created_at)"
            " VALUES (?,?,?,?,?,?)",
            (channel, account_id, user_id, display_name, source, ts(at)),
        )

    def accounts(self, user_id: str) -> list[tuple[str, str]]:
        """(channel, account id) of every account of the user."""
        return [(r[0], r[1]) for r in self._db.all(
            "SELECT channel, account_id FROM identities WHERE user_id=?", (user_id,))]  # fmt: skip

    def account_on(self, user_id: str, channel: str) -> Account | None:
        """One account of the user on ``channel`` (the first found), or None."""
        row = self._db.one(
            "SELECT channel, account_id, display_name FROM identities WHERE user_id=? AND channel=? LIMIT 1",
            (user_id, channel),
        )
        return Account(channel=row[0], account_id=row[1], display_name=row[2]) if row else None
