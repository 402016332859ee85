"""Who may reach the model: per-channel DM policy, group gating, invites and the pairing queue.

Policies (``channels.<name>.dm_policy``):

* ``pairing`` (default): an unknown DM sender gets a short one-time code and nothing else; the owner
  approves it with ``kith pairing approve CODE``. Codes expire, at most ``pairing_max_pending`` wait per
  channel, and a sender who keeps writing is answered at most once per ``pairing_reply_interval_s``,
  so a flood of strangers costs neither model calls nor outbound messages.
* ``allowlist``: only ``allow_from`` account ids (and previously approved senders).
* ``open``: anyone may DM. ``disabled``: no DMs at all.

Under ``pairing`` and ``allowlist`` a stranger who sends an owner's invite (``kith pairing invite``) is
approved at once: the invite never enters the queue, so no flood of strangers can keep an invited
person out.

The queue is shared by everyone who writes, so one attacker with many account ids must not be able
to keep it full (before issue 12, three ids did, for good). It stays fair this way:

* an account gets at most ``PAIRING_CODES_PER_ACCOUNT`` codes a day: holding slots costs fresh accounts;
* when the queue is full, a newcomer takes the slot of the oldest request once that one has had
  ``PAIRING_MIN_AGE`` (or its whole lifetime, if shorter) to be approved; before that, newcomers get
  silence. Every code handed out can be approved for at least that long, whatever comes after it, and
  a full queue admits at most ``pairing_max_pending`` newcomers per ``PAIRING_MIN_AGE``;
* refusals, evictions and exhausted quotas are counted per channel, logged, and shown by
  ``kith pairing list``, so the owner sees a flood and can answer it with invites.

Groups are separate: the conversation must be in ``group_allow`` (``"*"`` = any) and, unless
``require_mention`` is off, the bot must be mentioned or replied to.

The pairing queue, invites and approvals live in the state (``State.access``): the running gateway
uses its own state, the CLI (another process) opens the same database.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from gateway.channels import ChannelAccess
from gateway.config import Config
from gateway.state import ApprovedAccount, Invite, PairingRequest, QueueStats, State, open_config_state
from gateway.state.interface import Counter
from gateway.types import AccessDecision, ConversationKind, Drop, InboundMessage

# No 0/O, 1/I/L: codes are read off a phone screen and typed into a terminal.
_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
# Invites are never queued and never rate limited, so they are long instead: 31^16 is about 2^79.
INVITE_LENGTH = 16
INVITE_TTL_S = 7 * 86400
PAIRING_CODES_PER_ACCOUNT = 2  # per account per PAIRING_QUOTA_WINDOW: a second chance, not a supply
PAIRING_QUOTA_WINDOW = timedelta(days=1)
PAIRING_MIN_AGE = timedelta(minutes=10)  # a handed-out code survives a flood at least this long
STATS_WINDOW = timedelta(days=1)  # counters shown to the owner start again after a quiet day

def _now() -> datetime:
    return datetime.now(UTC)


def _ts(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds")


def new_code() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


def format_invite(code: str) -> str:
    return "-".join(code[i : i + 4] for i in range(0, len(code), 4))


class Admission(NamedTuple):
    """What the queue did with a stranger's message."""

    code: str | None  # the code to show, or None
    answer: bool  # whether to answer at all (a repeat within the reply interval gets silence)
    refused: str = ""  # why no code: "pairing queue full", "pairing code quota used"


class AccessStore:
    """The pairing queue, invites and approved senders: the rules of this module on ``State.access``."""

    def __init__(self, state: State, *, owned: bool = False) -> None:
        self.state = state
        self._owned = owned  # opened by for_config: closed by close()

    @classmethod
    def for_config(cls, config: Config) -> AccessStore:
        """A store on the data directory's state database, with a connection of its own (the CLI)."""
        return cls(open_config_state(config), owned=True)

    def close(self) -> None:
        if self._owned:
            self.state.close()

    # ---------------------------------------------------------------------------------- approvals
    def is_approved(self, channel: str, account_id: str) -> bool:
        return self.state.access.is_approved(channel, account_id)

    def approve_account(self, channel: str, account_id: str, *, display_name: str = "", via: str) -> None:
        self.state.access.approve(channel, account_id, display_name=display_name, via=via, at=_now())

    def revoke(self, channel: str, account_id: str) -> bool:
        return self.state.access.revoke(channel, account_id)

    def approved(self) -> list[ApprovedAccount]:
        return self.state.access.approved()

    # ------------------------------------------------------------------------------------ pairing
    def pending(self, channel: str | None = None) -> list[PairingRequest]:
        return self.state.access.pending(_now(), channel)

    def request(
        self,
        channel: str,
        account_id: str,
        display_name: str,
        *,
        ttl_s: float,
        max_pending: int,
        reply_interval_s: float,
    ) -> Admission:
        """Record a stranger's message in the queue (see the module docstring for the fairness rules)."""
        now = _now()
        with self.state.tx():
            return self._request(now, channel, account_id, display_name, ttl_s=ttl_s,
                                 max_pending=max_pending, reply_interval_s=reply_interval_s)  # fmt: skip

    def _request(self, now: datetime, channel: str, account_id: str, display_name: str, *, ttl_s: float,
                 max_pending: int, reply_interval_s: float) -> Admission:
        access = self.state.access
        access.expire_pairing(now)
        waiting = access.pairing_of(channel, account_id)
        if waiting is not None:
            code, last_reply_at = waiting
            answer = now >= last_reply_at + timedelta(seconds=reply_interval_s)
            access.repeat_request(code, answered_at=now if answer else None)
            return Admission(code, answer)
        if access.codes_issued(channel, account_id, since=now - PAIRING_QUOTA_WINDOW) >= PAIRING_CODES_PER_ACCOUNT:
            self._count(channel, "over_quota", now)
            return Admission(None, False, "pairing code quota used")
        if access.queued(channel) >= max_pending:
            protected = min(PAIRING_MIN_AGE, timedelta(seconds=ttl_s))
            oldest = access.oldest_pairing(channel)
            assert oldest is not None  # the queue is full, so not empty
            if oldest[1] > now - protected:
                self._count(channel, "refused", now)
                return Admission(None, False, "pairing queue full")
            access.delete_pairing(oldest[0])
            self._count(channel, "evicted", now)
        code = new_code()
        access.add_pairing(code, channel=channel, account_id=account_id, display_name=display_name[:200], at=now,
                           expires_at=now + timedelta(seconds=ttl_s))  # fmt: skip
        return Admission(code, True)

    def _count(self, channel: str, counter: Counter, now: datetime) -> None:
        self.state.access.count(channel, counter, now, window_start=now - STATS_WINDOW)

    def stats(self) -> list[QueueStats]:
        """Per channel: requests waiting, and how many strangers the queue turned away lately."""
        now = _now()
        return self.state.access.stats(now, since=now - STATS_WINDOW)

    # ------------------------------------------------------------------------------------ invites
    def create_invite(self, *, channel: str = "", ttl_s: float = INVITE_TTL_S, note: str = "") -> Invite:
        now = _now()
        invite = Invite(code="".join(secrets.choice(_ALPHABET) for _ in range(INVITE_LENGTH)), channel=channel,
                        note=note[:200], created_at=_ts(now), expires_at=_ts(now + timedelta(seconds=ttl_s)))
        self.state.access.add_invite(invite, now)
        return invite

    def invites(self) -> list[Invite]:
        return self.state.access.invites(_now())

    def revoke_invite(self, code: str) -> bool:
        return self.state.access.delete_invite(normalize_code(code))

    def use_invite(self, text: str, channel: str, account_id: str, display_name: str) -> bool:
        """Approve the sender if ``text`` is a live invite for this channel (``CODE`` or ``/start CODE``)."""
        words = text.strip().split()
        if words[:1] == ["/start"] or (words and words[0].startswith("/start@")):
            words = words[1:]
        candidate = normalize_code("".join(words))
        if len(candidate) != INVITE_LENGTH:
            return False  # not even shaped like an invite: no database work for ordinary first messages
        if not self.state.access.use_invite(candidate, channel, _now()):
            return False
        self.approve_account(channel, account_id, display_name=display_name, via="invite")
        return True

    def approve(self, code: str) -> PairingRequest | None:
        """Approve a live code: its sender becomes an approved account. None if unknown/expired."""
        req = self._take(code)
        if req is not None:
            self.approve_account(req.channel, req.account_id, display_name=req.display_name, via="pairing")
        return req

    def deny(self, code: str) -> PairingRequest | None:
        return self._take(code)

    def _take(self, code: str) -> PairingRequest | None:
        return self.state.access.take_pairing(normalize_code(code), _now())


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
        cfg = self.config.channels.get(channel)
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
        if self.store.use_invite(message.text, message.channel, message.account_id, message.display_name):
            return AccessDecision.ALLOW  # the owner said yes in advance: never queued, never crowded out
        if policy == "allowlist":
            return Drop(reason="sender not in allow_from")
        admission = self.store.request(
            message.channel,
            message.account_id,
            message.display_name,
            ttl_s=cfg.pairing_code_ttl_s,
            max_pending=cfg.pairing_max_pending,
            reply_interval_s=cfg.pairing_reply_interval_s,
        )
        if admission.code is None:
            return Drop(reason=admission.refused)
        if not admission.answer:
            return Drop(reason="pairing pending (already answered recently)")
        return Drop(reason="pairing requested", reply=pairing_instructions(admission.code, message.channel))
