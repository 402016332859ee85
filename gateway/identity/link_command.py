"""The ``/link`` conversation: make a code, redeem it, and confirm on both accounts before any merge.

``/link``                 a new code (or, while a request waits for this account, that request again)
``/link CODE``            redeem a code: both accounts are shown who the other one is, nothing merges
``/link confirm TOKEN``   this account agrees; the merge runs once the other account agreed too
``/link cancel``          drop this account's requests and codes

The state machine lives in ``gateway.identity.linking``; this module words it and tells the other account.
Telling the other account is best effort (it may be a web chat that is closed); the request waits
for it either way, and ``/link`` there shows it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.identity.linking import LinkError, LinkRequest, Party, Side
from gateway.types import ConversationAddress, ConversationKind, Reply, Turn
from gateway.util.text import split_text

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.identity")

NOTIFY_TIMEOUT_S = 10.0


def _notice(text: str) -> Reply:
    return Reply(text=text, notice=True)


def _minutes_left(request: LinkRequest) -> int:
    return max(1, math.ceil((request.expires_at - datetime.now(UTC)).total_seconds() / 60))


def prompt(request: LinkRequest, side: Side) -> str:
    """What one side is shown: who the other account is, which memory is kept, how to answer."""
    me, other = request.party(side), request.other(side)
    if me.confirmed:
        return (f"You confirmed the link with {other.label}. Waiting for that account to confirm too; "
                "nothing is joined yet. Send /link cancel to drop it.")
    if side == "issuer":
        head = (f"{other.label} used your link code and wants to join your memory. If both accounts confirm, "
                "everything that account has told me moves into your memory, and it can read all of your "
                "memory from then on.")
    else:
        head = (f"That code belongs to {other.label}. Linking joins this {me.channel} account to that "
                "account's memory: that memory is kept, everything you have told me here moves into it, "
                "and whoever uses that account can read all of it.")
    return (f"{head}\n\nOnly if that is your own other account, reply `/link confirm {me.token}` here within "
            f"{_minutes_left(request)} minutes. If you don't know that account, reply `/link cancel`. "
            "Nothing is joined until both accounts confirm.")


async def notify(gateway: Services, party: Party, text: str) -> bool:
    """Tell one side of a request something, in the direct conversation it used; False if undelivered."""
    key = f"{party.channel}:{party.conversation_id}"
    address = ConversationAddress(channel=party.channel, conversation_id=party.conversation_id,
                                  kind=ConversationKind.DM, user_id=party.user_id,
                                  persona=gateway.config.personas.for_conversation(party.channel, key))
    reply = Reply(text=text, chunks=tuple(split_text(text, gateway.message_limit(party.channel))), notice=True)
    try:
        async with asyncio.timeout(NOTIFY_TIMEOUT_S):
            await gateway.send(address, reply)
    except Exception as exc:  # a closed web chat, a platform error: the request waits for /link there
        log.info("link: could not notify %s:%s (%s)", party.channel, party.conversation_id, type(exc).__name__)
        return False
    return True


async def link_command(gateway: Services, turn: Turn, args: str) -> Reply:
    user, msg = turn.user, turn.message
    assert user is not None
    links = gateway.identities.links
    words = args.split()
    verb = words[0].lower() if words else ""

    if verb == "cancel":
        cancelled = links.cancel(msg.channel, msg.account_id)
        for request in cancelled:
            side = request.side_of(msg.channel, msg.account_id)
            if side is not None:
                await notify(gateway, request.other(side),
                             f"{request.party(side).label} cancelled the link request. Nothing was joined.")
        return _notice("Cancelled. Nothing was joined." if cancelled else
                       "There was no link request waiting; any link code of this account is void now.")

    if verb == "confirm":
        if len(words) < 2:
            return _notice("Send `/link confirm` followed by the confirmation code from my message that names "
                           "the other account (send /link to see that message again).")
        try:
            result = links.confirm(words[1], msg.channel, msg.account_id, lookup=gateway.identities.lookup)
        except LinkError as exc:
            return _notice(str(exc))
        request, side = result.request, result.side
        other = request.other(side)
        if not result.complete:
            return _notice(prompt(request, side) if result.already else
                           f"Confirmed here. Nothing is joined until {other.label} confirms too "
                           f"(within {_minutes_left(request)} minutes).")
        if result.merge_from is not None:
            await gateway.merge_users(into=result.into, source=result.merge_from)
        await notify(gateway, other, f"Linked. This account now shares one memory with {request.party(side).label}.")
        return _notice("Linked. This account now shares one memory with your other account.")

    if not verb:
        waiting = links.involving(msg.channel, msg.account_id)
        if waiting:
            request, side = waiting[0]
            return _notice(prompt(request, side) + "\n\n(To start over instead, send /link cancel, then /link.)")
        code = links.create(user.user_id, msg.channel, msg.account_id, conversation_id=msg.conversation_id,
                            name=msg.display_name)
        minutes = max(1, gateway.config.identity.link_code_ttl_s // 60)
        return _notice(
            f"Your link code is {code}. Within {minutes} minutes, send `/link {code}` to me from the other "
            "account you want to connect. Both accounts are then shown who the other one is, and nothing is "
            "joined until both confirm. Don't share the code with anyone else."
        )

    try:
        request = links.redeem(args, user.user_id, msg.channel, msg.account_id,
                               conversation_id=msg.conversation_id, name=msg.display_name)
    except LinkError as exc:
        return _notice(str(exc))
    told = await notify(gateway, request.issuer, prompt(request, "issuer"))
    where = request.issuer.channel
    tail = (f"\n\nI have asked the account on {where} to confirm as well." if told else
            f"\n\nThe account on {where} must confirm as well: send /link there to see the request.")
    return _notice(prompt(request, "redeemer") + tail)
