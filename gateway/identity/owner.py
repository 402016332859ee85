"""The single local owner: on loopback without ``server.token``, every local browser and ``kith chat`` is
one person, not one new person per browser or terminal (``server.local_owner``, on by default).

Who the owner is lives in the identities table as the account ``local:owner``: a merge moves it like
any other account, so when the owner is linked into another person (``/link``), that person is the
owner from then on, and erasing the owner (``kith users delete``) lets the next local sign-in start a
new one. Nothing beyond loopback ever reaches this: the callers grant it only where the automatic
local sign-in holds (``gateway.http.signin.is_local``). See docs/web.md#one-owner.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.identity.users import new_user_id
from gateway.state.errors import StorageError

if TYPE_CHECKING:
    from gateway.identity.users import Identities

log = logging.getLogger("kith.identity")

OWNER_CHANNEL = "local"
OWNER_ACCOUNT = "owner"
LOCAL_CHANNEL = "websocket"  # the channel of the web chat's and the terminal's clients


def local_owner(identities: Identities, *, client_id: str = "", name: str = "") -> str:
    """The owner's user id, made when there is none yet.

    The first time (a fresh data dir, or one from before there was an owner), the person of
    ``client_id`` becomes the owner when that person is local only (every account of theirs is a
    browser or terminal client): the browser someone uses after upgrading keeps its conversations.
    Someone who also has a chat account (signed in here once by a link) is never made the owner by it:
    a new user is."""
    found = identities.lookup(OWNER_CHANNEL, OWNER_ACCOUNT)
    if found is not None:
        return found
    state = identities.state
    claimed = identities.lookup(LOCAL_CHANNEL, client_id) if client_id else None
    if claimed is not None and any(channel != LOCAL_CHANNEL for channel, _ in identities.accounts(claimed)):
        claimed = None
    now = datetime.now(UTC)
    try:
        with state.tx():
            if claimed is None:
                claimed = new_user_id()
                state.users.create(claimed, display_name=name, timezone=identities.config.timezone, at=now)
            state.identities.add(OWNER_CHANNEL, OWNER_ACCOUNT, claimed, display_name=name, source="owner", at=now)
    except StorageError:
        # Another node of a cluster made the owner in the same instant (the account is unique): theirs.
        found = identities.lookup(OWNER_CHANNEL, OWNER_ACCOUNT)
        if found is None:
            raise
        return found
    log.info("user %s is the local owner (every local browser and terminal signs in as them)", claimed)
    return claimed


def local_person(identities: Identities, *, client_id: str, name: str = "") -> str:
    """Whom a local browser or terminal client is: the person its ``client_id`` already belongs to (an
    account linked on purpose with ``/link`` or ``identity_links``, or a person of its own from before
    there was an owner, until it is linked), else the owner, made first when there is none yet."""
    owner = local_owner(identities, client_id=client_id, name=name)
    return identities.lookup(LOCAL_CHANNEL, client_id) or owner


def attach_client(identities: Identities, user_id: str, client_id: str, name: str, *, source: str) -> None:
    """A browser or terminal client new to kith becomes an account of ``user_id`` (no new person)."""
    with identities.state.tx():
        identities.state.identities.add(LOCAL_CHANNEL, client_id, user_id, display_name=name, source=source,
                                        at=datetime.now(UTC))  # fmt: skip
    log.info("websocket client %s attached to user %s (%s)", client_id, user_id, source)
