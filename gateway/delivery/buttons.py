"""Buttons for the host's confirmations: pressing one is typing its command, and only its person may.

The host's notices ask for a typed answer (``/link confirm AB12``, ``/forget confirm``); a platform
with buttons (Telegram inline keyboards, Discord components, Slack Block Kit) offers them as well, and
the typed commands keep working. ``offered(reply)`` says which buttons a reply offers: only a host
notice asking the question offers any, never a model's words (which could quote a command) nor a text
that merely names the commands (``/help``).

``ButtonOffers`` remembers each offer under a random token, the only thing the platform carries back
(Telegram's ``callback_data``, Discord's ``custom_id``), with who may press it: the account the reply
answered, or, for a message sent to a direct conversation outside a turn (the other side of a
``/link``), whoever is in that conversation with the bot. A press from anyone else, in another
conversation, or after the offer expired or was used, changes nothing; a valid press is used up,
together with the other buttons of its message, and the adapter runs its command as a message from
the presser, through the whole turn (access, identity, the command's own checks).
"""

from __future__ import annotations

import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gateway.types import Reply

__all__ = ["Button", "ButtonOffers", "Offer", "Press", "offered"]

PREFIX = "kith:"  # callback data / custom ids that are ours
# The questions themselves (gateway/identity/link_command.py, gateway/memory/edit/forget.py), not any
# text naming the commands: /help lists "/link confirm CODE" and "/forget confirm" too.
_LINK = re.compile(r"reply `/link confirm ([A-Z2-9]{4})` here")
_FORGET = "Reply /forget confirm to remove"
# A tool call waiting for its person (gateway/tools.py request_text): its last line.
_APPROVAL = re.compile(r"^Approve with /approve ([0-9a-f]{6}) or /deny \1$", re.M)


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    command: str  # what pressing it sends, as if typed


def offered(reply: Reply) -> tuple[Button, ...]:
    """The confirmation buttons ``reply`` offers: none unless it is a host notice asking the question."""
    if not reply.notice:
        return ()
    text = reply.text
    if (found := _LINK.search(text)) is not None:
        buttons = [Button("Confirm link", f"/link confirm {found.group(1)}")]
        if "reply `/link cancel`" in text:
            buttons.append(Button("Cancel", "/link cancel"))
        return tuple(buttons)
    if (found := _APPROVAL.search(text)) is not None:
        return (Button("Approve", f"/approve {found.group(1)}"), Button("Deny", f"/deny {found.group(1)}"))
    if _FORGET in text:
        buttons = [Button("Forget it", "/forget confirm")]
        if "/forget cancel" in text:
            buttons.append(Button("Keep it", "/forget cancel"))
        return tuple(buttons)
    return ()


@dataclass(frozen=True, slots=True)
class Offer:
    token: str
    button: Button
    conversation_id: str
    account_id: str | None  # None: whoever is in this direct conversation with the bot
    group: str  # the tokens of one message share it: a press uses up all of them
    expires_at: float


@dataclass(frozen=True, slots=True)
class Press:
    outcome: Literal["ok", "not_yours", "expired"]
    button: Button | None = None

    @property
    def notice(self) -> str:
        if self.outcome == "not_yours":
            return "This button is not for you."
        if self.outcome == "expired":
            return "This button has expired; type the command instead."
        return ""


class ButtonOffers:
    """The buttons an adapter has on screen, bounded (the oldest forgotten first) and expiring."""

    def __init__(self, *, ttl_s: float = 3600.0, max_offers: int = 2000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl, self._max, self._clock = ttl_s, max_offers, clock
        self._offers: OrderedDict[str, Offer] = OrderedDict()

    def offer(self, buttons: tuple[Button, ...], *, conversation_id: str, account_id: str | None) -> list[Offer]:
        """One token per button, for one message; ``account_id`` None only for a direct conversation."""
        group = secrets.token_hex(4)
        expires = self._clock() + self._ttl
        made = []
        for button in buttons:
            token = PREFIX + secrets.token_urlsafe(12)  # 21 characters: well inside Telegram's 64 bytes
            made.append(offer := Offer(token, button, conversation_id, account_id, group, expires))
            self._offers[token] = offer
        while len(self._offers) > self._max:
            self._offers.popitem(last=False)
        return made

    def press(self, token: str, *, conversation_id: str, account_id: str) -> Press:
        offer = self._offers.get(token)
        if offer is None or offer.expires_at < self._clock():
            self._offers.pop(token, None)
            return Press("expired")
        if offer.conversation_id != conversation_id or (offer.account_id is not None
                                                        and offer.account_id != account_id):
            return Press("not_yours")  # the offer stays for its person
        for other in [t for t, o in self._offers.items() if o.group == offer.group]:
            del self._offers[other]
        return Press("ok", offer.button)

    def __len__(self) -> int:
        return len(self._offers)
