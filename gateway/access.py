"""Who may reach the model: per-channel DM policy, group gating and the pairing queue.

Policies (``channels.<name>.dm_policy``):

* ``pairing`` (default): an unknown DM sender gets a short one-time code and nothing else; the owner
  approves it with ``kith pairing approve CODE``. Codes expire, at most ``pairing_max_pending`` wait per
  channel, and a sender who keeps writing is answered at most once per ``pairing_reply_interval_s``,
  so a flood of strangers costs neither model calls nor outbound messages.
* ``allowlist``: only ``allow_from`` account ids (and previously approved senders).
* ``open``: anyone may DM. ``disabled``: no DMs at all.

Groups are separate: the conversation must be in ``group_allow`` (``"*"`` = any) and, unless
``require_mention`` is off, the bot must be mentioned or replied to.

The pairing queue and approvals live in their own tables in ``<data_dir>/state.sqlite``, on this
module's own connection, so the CLI (another process) and the running gateway share them.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.config import ChannelAccess, Config
from gateway.state import enable_wal
from gateway.types import AccessDecision, ConversationKind, Drop, InboundMessage

# No 0/O, 1/I/L: codes are read off a phone screen and typed into a terminal.
_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS access_pairing (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    last_reply_at TEXT NOT NULL,
    requests INTEGER NOT NULL DEFAULT 1,
    UNIQUE (channel, account_id)
);
CREATE TABLE IF NOT EXISTS access_approved (
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    approved_at TEXT NOT NULL,
    via TEXT NOT NULL DEFAULT 'pairing',
    PRIMARY KEY (channel, account_id)
);
"""


def _now() -> datetime:
    return datetime.now(UTC)


def _ts(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


def new_code() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingRequest:
    code: str
    channel: str
    account_id: str
    display_name: str
    created_at: str
    expires_at: str
    requests: int


class AccessStore:
    """The pairing queue and the approved senders, in ``state.sqlite`` (WAL)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # check_same_thread=False + our lock: the gateway calls from the loop thread, tests from others.
        self._db = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA busy_timeout=10000")
            enable_wal(self._db)
            self._db.executescript(_SCHEMA)

    @classmethod
    def for_config(cls, config: Config) -> AccessStore:
        return cls(Path(config.data_dir) / "state.sqlite")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---------------------------------------------------------------------------------- approvals
    def is_approved(self, channel: str, account_id: str) -> bool:
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM access_approved WHERE channel=? AND account_id=?", (channel, account_id)
            ).fetchone()
        return row is not None

    def approve_account(self, channel: str, account_id: str, *, display_name: str = "", via: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO access_approved(channel, account_id, display_name, approved_at, via)"
                " VALUES (?,?,?,?,?)",
                (channel, account_id, display_name, _ts(_now()), via),
            )
            self._db.execute(
                "DELETE FROM access_pairing WHERE channel=? AND account_id=?", (channel, account_id)
            )

    def revoke(self, channel: str, account_id: str) -> bool:
        with self._lock:
            cur = self._db.execute(
                "DELETE FROM access_approved WHERE channel=? AND account_id=?", (channel, account_id)
            )
        return cur.rowcount > 0

    def approved(self) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute("SELECT * FROM access_approved ORDER BY approved_at").fetchall()

    # ------------------------------------------------------------------------------------ pairing
    def pending(self, channel: str | None = None) -> list[PairingRequest]:
        now = _ts(_now())
        sql = "SELECT * FROM access_pairing WHERE expires_at > ?"
        args: tuple[str, ...] = (now,)
        if channel:
            sql, args = sql + " AND channel=?", (now, channel)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created_at", args).fetchall()
        return [_pairing(r) for r in rows]

    def request(
        self,
        channel: str,
        account_id: str,
        display_name: str,
        *,
        ttl_s: float,
        max_pending: int,
        reply_interval_s: float,
    ) -> tuple[str | None, bool]:
        """Record a pairing request. Returns (code to show or None, whether to answer at all)."""
        now = _now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM access_pairing WHERE expires_at <= ?", (_ts(now),))
                row = self._db.execute(
                    "SELECT code, last_reply_at FROM access_pairing WHERE channel=? AND account_id=?",
                    (channel, account_id),
                ).fetchone()
                if row is not None:
                    due = datetime.fromisoformat(row["last_reply_at"]) + timedelta(seconds=reply_interval_s)
                    answer = now >= due
                    self._db.execute(
                        "UPDATE access_pairing SET requests=requests+1, last_reply_at=? WHERE code=?",
                        (_ts(now) if answer else row["last_reply_at"], row["code"]),
                    )
                    self._db.execute("COMMIT")
                    return row["code"], answer
                (count,) = self._db.execute(
                    "SELECT COUNT(*) FROM access_pairing WHERE channel=?", (channel,)
                ).fetchone()
                if count >= max_pending:
                    self._db.execute("COMMIT")
                    return None, False
                code = new_code()
                self._db.execute(
                    "INSERT INTO access_pairing(code, channel, account_id, display_name, created_at,"
                    " expires_at, last_reply_at) VALUES (?,?,?,?,?,?,?)",
                    (
                        code,
                        channel,
                        account_id,
                        display_name[:200],
                        _ts(now),
                        _ts(now + timedelta(seconds=ttl_s)),
                        _ts(now),
                    ),
                )
                self._db.execute("COMMIT")
                return code, True
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def approve(self, code: str) -> PairingRequest | None:
        """Approve a live code: its sender becomes an approved account. None if unknown/expired."""
        req = self._take(code)
        if req is not None:
            self.approve_account(req.channel, req.account_id, display_name=req.display_name, via="pairing")
        return req

    def deny(self, code: str) -> PairingRequest | None:
        return self._take(code)

    def _take(self, code: str) -> PairingRequest | None:
        normalized = normalize_code(code)
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM access_pairing WHERE code=? AND expires_at > ?", (normalized, _ts(_now()))
            ).fetchone()
            self._db.execute("DELETE FROM access_pairing WHERE code=?", (normalized,))
        return None if row is None else _pairing(row)


def _pairing(row: sqlite3.Row) -> PairingRequest:
    return PairingRequest(
        code=row["code"],
        channel=row["channel"],
        account_id=row["account_id"],
        display_name=row["display_name"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        requests=row["requests"],
    )


def pairing_instructions(code: str, channel: str) -> str:
    return (
        "Hi! I only talk to people my owner has approved.\n"
        f"Your pairing code is {code}. Ask the owner to run:\n"
        f"  kith pairing approve {code}\n"
        f"(on {channel}; the code expires, and repeated messages get no new code)."
    )


class AccessPolicy:
    """Applies a channel's ``ChannelAccess`` settings to one inbound message."""

    def __init__(self, config: Config, store: AccessStore) -> None:
        self.config = config
        self.store = store

    def channel_config(self, channel: str) -> ChannelAccess | None:
        cfg = getattr(self.config.channels, channel, None)
        return cfg if isinstance(cfg, ChannelAccess) else None

    def check(self, message: InboundMessage) -> AccessDecision | Drop | None:
        cfg = self.channel_config(message.channel)
        if cfg is None:
            return None  # not a channel this policy knows: let another plugin (or the default deny) decide
        if message.kind is ConversationKind.GROUP:
            return self._check_group(cfg, message)
        return self._check_dm(cfg, message)

    @staticmethod
    def _check_group(cfg: ChannelAccess, message: InboundMessage) -> AccessDecision | Drop:
        allowed = "*" in cfg.group_allow or message.conversation_id in cfg.group_allow
        if not allowed:
            return Drop(reason=f"group {message.conversation_id!r} not in group_allow")
        if cfg.require_mention and not message.mentioned:
            return Drop(reason="group message without a mention")
        return AccessDecision.ALLOW

    def _check_dm(self, cfg: ChannelAccess, message: InboundMessage) -> AccessDecision | Drop:
        policy = cfg.dm_policy
        if policy == "disabled":
            return Drop(reason="direct messages are disabled on this channel")
        if policy == "open":
            return AccessDecision.ALLOW
        listed = message.account_id in cfg.allow_from
        if listed or self.store.is_approved(message.channel, message.account_id):
            return AccessDecision.ALLOW
        if policy == "allowlist":
            return Drop(reason="sender not in allow_from")
        code, answer = self.store.request(
            message.channel,
            message.account_id,
            message.display_name,
            ttl_s=cfg.pairing_code_ttl_s,
            max_pending=cfg.pairing_max_pending,
            reply_interval_s=cfg.pairing_reply_interval_s,
        )
        if code is None:
            return Drop(reason="pairing queue full")
        if not answer:
            return Drop(reason="pairing pending (already answered recently)")
        return Drop(reason="pairing requested", reply=pairing_instructions(code, message.channel))
