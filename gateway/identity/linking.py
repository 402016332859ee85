"""Linking two accounts of one person: link codes, and a merge only both accounts confirmed.

``/link`` on account A (the *issuer*) makes a one-time code. ``/link CODE`` on account B (the
*redeemer*) merges nothing: it turns the code into a pending request that names both sides. Each side
is then shown who the other one is (display name, channel, account id masked) and which memory is kept
(the issuer's), together with a short confirmation code of its own; only ``/link confirm <its code>``
from that very account counts. When both sides have confirmed, B's user is merged into A's.

Both sides, because the attack can run either way:

* reverse link: an attacker makes a code and talks a victim into sending ``/link CODE``; without the
  confirmation the victim's whole memory moved into the attacker's user. Now the victim is told whose
  memory they would join and has to confirm with a code only they were shown.
* forward link: a code that leaked to someone else lets their account join the issuer's memory and
  read it. Now the issuer is told which account wants in and has to confirm too.

Requests expire (``identity.link_code_ttl_s``, again from the redemption), and either side can
``/link cancel``. Wrong link codes are limited per account and in total (``GuessLimiter``), so
rotating account ids does not buy more guesses.

Requests live in the state (``State.links``), next to the identities they change.
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from gateway.state import LinkRequestRecord, State
from gateway.util.safetext import one_line

if TYPE_CHECKING:
    from gateway.config import Config

log = logging.getLogger("kith.identity")

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O/1/I: codes are typed by hand
CODE_LENGTH = 8
TOKEN_LENGTH = 4  # the per-side confirmation code: proves the person read the message naming the other side
MAX_LINK_FAILURES = 5  # wrong codes per account per window
MAX_LINK_FAILURES_OVERALL = 30  # wrong codes per window from all accounts together
FAILURE_WINDOW = timedelta(minutes=10)

Side = Literal["issuer", "redeemer"]
Lookup = Callable[[str, str], "str | None"]  # Identities.lookup: (channel, account id) -> user id

UNKNOWN_CODE = "That link code is unknown or expired. Send /link on your other account first."


class LinkError(Exception):
    """A link request that cannot be honoured; the message is shown to the user."""


def _now() -> datetime:
    return datetime.now(UTC)


def _random(n: int) -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(n))


def normalize(code: str) -> str:
    return code.strip().upper().replace("-", "").replace(" ", "")


def mask_account(account_id: str) -> str:
    """Enough of an account id to recognise one's own account, not enough to learn someone else's."""
    clean = one_line(account_id, limit=200)
    shown = max(1, min(4, len(clean) // 3))
    return "…" + clean[-shown:]


@dataclass(frozen=True, slots=True)
class Party:
    user_id: str  # "" for a redeemer that had no user yet
    channel: str
    account_id: str
    conversation_id: str
    name: str  # the display name when the party took part, made safe for one line
    token: str
    confirmed: bool

    @property
    def label(self) -> str:
        # Backticks out: a name like "`/link confirm AAAA`" must not look like our instruction.
        name = self.name.replace("`", "'")
        name = f"“{name}”" if name else "an account without a display name"
        return f"{name} on {self.channel} (account {mask_account(self.account_id)})"


@dataclass(frozen=True, slots=True)
class LinkRequest:
    code: str
    issuer: Party
    redeemer: Party | None  # None until the code is redeemed
    expires_at: datetime

    def side_of(self, channel: str, account_id: str) -> Side | None:
        if (self.issuer.channel, self.issuer.account_id) == (channel, account_id):
            return "issuer"
        if self.redeemer and (self.redeemer.channel, self.redeemer.account_id) == (channel, account_id):
            return "redeemer"
        return None

    def party(self, side: Side) -> Party:
        party = self.issuer if side == "issuer" else self.redeemer
        assert party is not None
        return party

    def other(self, side: Side) -> Party:
        return self.party("redeemer" if side == "issuer" else "issuer")


@dataclass(frozen=True, slots=True)
class Confirmation:
    request: LinkRequest
    side: Side
    complete: bool  # both sides have confirmed: merge ``merge_from`` into ``into`` (if any)
    into: str = ""
    merge_from: str | None = None
    already: bool = False  # this side had confirmed before


class GuessLimiter:
    """Wrong link codes per account and in total over a sliding window.

    The total is what stops guessing: an attacker who creates a new account id for every guess gets a
    fresh per-account allowance each time, never a fresh overall one. Memory stays bounded because a
    failure is only recorded while the overall budget lasts.
    """

    def __init__(self, per_account: int = MAX_LINK_FAILURES, overall: int = MAX_LINK_FAILURES_OVERALL,
                 window: timedelta = FAILURE_WINDOW) -> None:
        self.per_account = per_account
        self.overall = overall
        self.window = window
        self._by_account: dict[tuple[str, str], deque[datetime]] = {}
        self._all: deque[datetime] = deque()
        self._paused_logged: datetime | None = None

    def _prune(self, now: datetime) -> None:
        cutoff = now - self.window
        while self._all and self._all[0] <= cutoff:
            self._all.popleft()
        for key in [k for k, q in self._by_account.items() if not q or q[-1] <= cutoff]:
            del self._by_account[key]
        for q in self._by_account.values():
            while q and q[0] <= cutoff:
                q.popleft()

    def check(self, key: tuple[str, str], now: datetime) -> None:
        self._prune(now)
        if len(self._by_account.get(key, ())) >= self.per_account:
            raise LinkError("Too many wrong link codes. Wait ten minutes and try again.")
        if len(self._all) >= self.overall:
            if self._paused_logged is None or now - self._paused_logged >= self.window:
                self._paused_logged = now
                log.warning("link codes: %d wrong codes in %s from all accounts; linking is paused",
                            len(self._all), self.window)
            raise LinkError("Linking is paused for a few minutes because too many wrong link codes were tried. "
                            "Please try again later.")

    def failed(self, key: tuple[str, str], now: datetime) -> None:
        self._by_account.setdefault(key, deque()).append(now)
        self._all.append(now)


class LinkRequests:
    def __init__(self, state: State, config: Config) -> None:
        self.state = state
        self.config = config
        self.limiter = GuessLimiter()

    @property
    def ttl(self) -> timedelta:
        return timedelta(seconds=self.config.identity.link_code_ttl_s)

    # ----------------------------------------------------------------------------------- reads
    def get(self, code: str) -> LinkRequest | None:
        record = self.state.links.get(code, _now())
        return None if record is None else _request(record)

    def involving(self, channel: str, account_id: str) -> list[tuple[LinkRequest, Side]]:
        """Redeemed, unexpired requests in which this account is a party, newest first."""
        out: list[tuple[LinkRequest, Side]] = []
        for record in self.state.links.involving(channel, account_id, _now()):
            req = _request(record)
            side = req.side_of(channel, account_id)
            if side is not None:
                out.append((req, side))
        return out

    # ---------------------------------------------------------------------------------- writes
    def create(self, user_id: str, channel: str, account_id: str, *, conversation_id: str = "",
               name: str = "") -> str:
        """A fresh one-time code for this account (an older unredeemed code of the user is dropped)."""
        code = _random(CODE_LENGTH)
        now = _now()
        with self.state.tx():
            self.state.links.expire(now)
            self.state.links.drop_unredeemed_of(user_id)
            self.state.links.create(code, user_id=user_id, channel=channel, account_id=account_id,
                                    conversation_id=conversation_id or account_id, name=one_line(name), at=now,
                                    expires_at=now + self.ttl)  # fmt: skip
        return code

    def redeem(self, code: str, user_id: str | None, channel: str, account_id: str, *, conversation_id: str = "",
               name: str = "") -> LinkRequest:
        """Turn ``code`` into a request both sides must confirm; nothing is merged here."""
        key = (channel, account_id)
        now = _now()
        self.limiter.check(key, now)
        normalized = normalize(code)
        record = self.state.links.unredeemed(normalized, now)
        if record is None:
            self.limiter.failed(key, now)
            raise LinkError(UNKNOWN_CODE)
        if (record.issuer_channel, record.issuer_account) == key:
            raise LinkError("That is the code this account made. Send it from your other account.")
        if user_id is not None and user_id == record.issuer_user:
            self.state.links.delete(normalized)
            raise LinkError("This account already shares that memory; there is nothing to link.")
        with self.state.tx():
            self.state.links.expire(now)
            # One open request per redeeming account: a newer code replaces an older request.
            self.state.links.drop_redeemed_by(channel, account_id)
            redeemed = self.state.links.redeem(
                normalized, user_id=user_id, channel=channel, account_id=account_id,
                conversation_id=conversation_id or account_id, name=one_line(name),
                redeemer_token=_random(TOKEN_LENGTH), issuer_token=_random(TOKEN_LENGTH), expires_at=now + self.ttl,
            )  # fmt: skip
        if not redeemed:  # redeemed by someone else a moment ago
            raise LinkError(UNKNOWN_CODE)
        request = self.get(normalized)
        assert request is not None
        log.info("link request: %s:%s wants to join user %s (both sides must confirm)", channel, account_id,
                 request.issuer.user_id)
        return request

    def confirm(self, token: str, channel: str, account_id: str, *, lookup: Lookup) -> Confirmation:
        """Record this side's confirmation; when both sides have confirmed, say what to merge."""
        pending = self.involving(channel, account_id)
        if not pending:
            raise LinkError("There is no link request waiting for this account. Send /link to start one.")
        given = normalize(token)
        match = next(((r, s) for r, s in pending if given and secrets.compare_digest(
            given.encode(), r.party(s).token.encode())), None)
        if match is None:
            raise LinkError("That confirmation code does not match. It is in my message that names the other "
                            "account; send /link to see that message again.")
        request, side = match
        if request.party(side).confirmed:
            return Confirmation(request=request, side=side, complete=False, already=True)
        self.state.links.confirm(request.code, side)
        request = self.get(request.code) or request
        if not request.other(side).confirmed:
            return Confirmation(request=request, side=side, complete=False)
        return self._complete(request, side, lookup)

    def _complete(self, request: LinkRequest, side: Side, lookup: Lookup) -> Confirmation:
        redeemer = request.party("redeemer")
        into = request.issuer.user_id
        self.state.links.delete(request.code)
        # Both confirmations were given for the accounts as they were then; refuse if either moved since.
        if lookup(request.issuer.channel, request.issuer.account_id) != into or self.state.users.get(into) is None:
            raise LinkError("Your other account changed in the meantime, so nothing was linked. "
                            "Start again with /link.")
        current = lookup(redeemer.channel, redeemer.account_id)
        if (current or "") != redeemer.user_id:
            raise LinkError("This account changed in the meantime, so nothing was linked. Start again with /link.")
        if current is None:
            self.state.identities.add(redeemer.channel, redeemer.account_id, into, source="link")
        log.info("link confirmed by both sides: %s:%s joins user %s", redeemer.channel, redeemer.account_id, into)
        merge_from = current if current not in (None, into) else None
        return Confirmation(request=request, side=side, complete=True, into=into, merge_from=merge_from)

    def cancel(self, channel: str, account_id: str) -> list[LinkRequest]:
        """Drop every request (and unredeemed code) this account is a party of; return the redeemed ones."""
        records = self.state.links.of_account(channel, account_id)
        with self.state.tx():
            for record in records:
                self.state.links.delete(record.code)
        now = _now()
        return [r for r in map(_request, records) if r.redeemer is not None and r.expires_at > now]


def _request(r: LinkRequestRecord) -> LinkRequest:
    issuer = Party(user_id=r.issuer_user, channel=r.issuer_channel, account_id=r.issuer_account,
                   conversation_id=r.issuer_conversation, name=r.issuer_name, token=r.issuer_token,
                   confirmed=r.issuer_ok)  # fmt: skip
    redeemer = None
    if r.redeemer_account is not None:
        redeemer = Party(user_id=r.redeemer_user or "", channel=r.redeemer_channel or "",
                         account_id=r.redeemer_account, conversation_id=r.redeemer_conversation,
                         name=r.redeemer_name, token=r.redeemer_token, confirmed=r.redeemer_ok)  # fmt: skip
    return LinkRequest(code=r.code, issuer=issuer, redeemer=redeemer, expires_at=r.expires_at)
