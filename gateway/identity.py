"""Unified user namespace: (channel, account id) -> user id, operator links and link codes.

A user id names the person's memory tree ``users/<user_id>/``; it is random for people who first
appear in chat and chosen by the operator in ``identity_links``. Linking two accounts merges the
second account's user into the first: identities, sessions and turns move over, and the memory tree
is merged file by file (Markdown logs are concatenated, never overwritten).
"""

from __future__ import annotations

import logging
import secrets
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.state import State, parse_ts, ts
from gateway.types import InboundMessage, UserRef

if TYPE_CHECKING:
    from gateway.app import Gateway
    from gateway.config import Config

log = logging.getLogger("kith.identity")

_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O/1/I: codes are typed by hand
MAX_LINK_FAILURES = 5


class LinkError(Exception):
    """A link request that cannot be honoured; the message is shown to the user."""


def new_user_id() -> str:
    return "u" + secrets.token_hex(6)


class Identities:
    def __init__(self, state: State, config: Config) -> None:
        self.state = state
        self.config = config
        self.users_dir = Path(config.data_dir) / "users"
        self._failures: dict[tuple[str, str], list[datetime]] = {}

    # --------------------------------------------------------------------------- resolution
    def lookup(self, channel: str, account_id: str) -> str | None:
        row = self.state.one(
            "SELECT user_id FROM identities WHERE channel=? AND account_id=?", channel, account_id
        )
        return row["user_id"] if row else None

    def resolve(self, message: InboundMessage, *, create: bool = True) -> UserRef | None:
        user_id = self.lookup(message.channel, message.account_id)
        if user_id is None:
            if not create:
                return None
            user_id = new_user_id()
            with self.state.tx() as db:
                now = ts()
                db.execute(
                    "INSERT INTO users(user_id, display_name, timezone, created_at) VALUES (?,?,?,?)",
                    (user_id, message.display_name, self.config.timezone, now),
                )
                db.execute(
                    "INSERT INTO identities(channel, account_id, user_id, display_name, source, created_at)"
                    " VALUES (?,?,?,?,?,?)",
                    (message.channel, message.account_id, user_id, message.display_name, "auto", now),
                )
        row = self.state.user(user_id)
        return UserRef(
            user_id=user_id,
            display_name=(row["display_name"] if row else "") or message.display_name,
            timezone=row["timezone"] if row else self.config.timezone,
        )

    def accounts(self, user_id: str) -> list[tuple[str, str]]:
        rows = self.state.all("SELECT channel, account_id FROM identities WHERE user_id=?", user_id)
        return [(r["channel"], r["account_id"]) for r in rows]

    # -------------------------------------------------------------------------- operator links
    def apply_config_links(self) -> None:
        """Make ``identity_links`` true in the state: each listed account belongs to its user."""
        for link in self.config.identity_links:
            with self.state.tx() as db:
                db.execute(
                    "INSERT OR IGNORE INTO users(user_id, display_name, timezone, created_at) VALUES (?,?,?,?)",
                    (link.user, link.user, self.config.timezone, ts()),
                )
            for acct in link.accounts:
                channel, account_id = acct.split(":", 1)
                current = self.lookup(channel, account_id)
                if current == link.user:
                    continue
                if current is None:
                    with self.state.tx() as db:
                        db.execute(
                            "INSERT INTO identities(channel, account_id, user_id, display_name, source,"
                            " created_at) VALUES (?,?,?,?,?,?)",
                            (channel, account_id, link.user, "", "config", ts()),
                        )
                else:
                    self.merge(into=link.user, source=current)

    # ----------------------------------------------------------------------------- link codes
    def create_link_code(self, user_id: str, channel: str, account_id: str) -> str:
        code = "".join(secrets.choice(_CODE_ALPHABET) for _ in range(8))
        expires = datetime.now(UTC) + timedelta(seconds=self.config.identity.link_code_ttl_s)
        with self.state.tx() as db:
            db.execute("DELETE FROM link_codes WHERE expires_at < ?", (ts(),))
            db.execute("DELETE FROM link_codes WHERE user_id=?", (user_id,))  # one live code per user
            db.execute(
                "INSERT INTO link_codes(code, user_id, channel, account_id, expires_at) VALUES (?,?,?,?,?)",
                (code, user_id, channel, account_id, ts(expires)),
            )
        return code

    def redeem_link_code(self, code: str, channel: str, account_id: str) -> tuple[str, str | None]:
        """Link (channel, account_id) to the user who created ``code``.

        Returns (target user, user to merge into it or None). The caller performs the merge through
        ``Gateway.merge_users`` so plugins can flush buffered writes of the merged user first.
        """
        key = (channel, account_id)
        now = datetime.now(UTC)
        recent = [t for t in self._failures.get(key, []) if now - t < timedelta(minutes=10)]
        if len(recent) >= MAX_LINK_FAILURES:
            raise LinkError("Too many wrong link codes. Wait ten minutes and try again.")
        normalized = code.strip().upper().replace("-", "").replace(" ", "")
        row = self.state.one("SELECT * FROM link_codes WHERE code=?", normalized)
        if row is None or parse_ts(row["expires_at"]) < now:
            self._failures[key] = [*recent, now]
            raise LinkError("That link code is unknown or expired. Send /link on your other account first.")
        target = row["user_id"]
        with self.state.tx() as db:
            db.execute("DELETE FROM link_codes WHERE code=?", (normalized,))
        current = self.lookup(channel, account_id)
        if current == target:
            return target, None
        if current is None:
            with self.state.tx() as db:
                db.execute(
                    "INSERT INTO identities(channel, account_id, user_id, display_name, source, created_at)"
                    " VALUES (?,?,?,?,?,?)",
                    (channel, account_id, target, "", "link", ts()),
                )
            return target, None
        return target, current

    # ---------------------------------------------------------------------------------- merge
    def merge(self, *, into: str, source: str) -> None:
        """Move everything of user ``source`` to user ``into`` and delete ``source``."""
        if into == source:
            return
        with self.state.tx() as db:
            for table in ("identities", "sessions", "turns"):
                db.execute(f"UPDATE {table} SET user_id=? WHERE user_id=?", (into, source))
            db.execute(
                "UPDATE sessions SET scope_key=? WHERE scope_key=?", (f"user:{into}", f"user:{source}")
            )
            db.execute("UPDATE conversations SET user_id=? WHERE user_id=?", (into, source))
            db.execute("DELETE FROM link_codes WHERE user_id=?", (source,))
            db.execute("DELETE FROM users WHERE user_id=?", (source,))
        # Two open sessions for one user would be ambiguous: keep the newest open.
        rows = self.state.all(
            "SELECT session_id FROM sessions WHERE scope_key=? AND ended_at IS NULL ORDER BY started_at DESC",
            f"user:{into}",
        )
        with self.state.tx() as db:
            for r in rows[1:]:
                db.execute("UPDATE sessions SET ended_at=? WHERE session_id=?", (ts(), r["session_id"]))
        self._merge_tree(self.users_dir / source, self.users_dir / into)
        log.info("merged user %s into %s", source, into)

    @staticmethod
    def _merge_tree(src: Path, dst: Path) -> None:
        if not src.is_dir() or src.is_symlink():
            return
        for path in sorted(src.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                path.replace(target)
            elif path.suffix in (".md", ".jsonl"):
                with target.open("a", encoding="utf-8") as out:
                    out.write(path.read_text(encoding="utf-8"))
            # other derived files (indexes) are rebuilt from the Markdown
        shutil.rmtree(src, ignore_errors=True)


@hookimpl(trylast=True)
def gateway_resolve_identity(gateway: Gateway, message: InboundMessage) -> UserRef | None:
    return gateway.identities.resolve(message)
