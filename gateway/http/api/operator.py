"""The operator's routes: every user, and the pairing queue (approve or deny a stranger's code).

Pairing goes through ``gateway.access.AccessStore``, the same rules as ``kith pairing``.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from gateway.access import AccessStore
from gateway.http.api.spec import Answer, ApiError, Call, Handler, Route


class UserAccount(Answer):
    channel: str
    account_id: str


class UserOut(Answer):
    user_id: str
    display_name: str
    timezone: str
    tier: int | None
    created_at: datetime
    accounts: list[UserAccount]


class UserList(Answer):
    users: list[UserOut]


class Pairing(Answer):
    code: str
    channel: str
    account_id: str
    display_name: str
    created_at: str
    expires_at: str
    requests: int = Field(description="how often the stranger asked")


class PairingList(Answer):
    pending: list[Pairing]


class PairingDone(Answer):
    code: str
    action: str = Field(description="approved or denied")
    channel: str
    account_id: str
    display_name: str


async def users(call: Call) -> UserList:
    state = call.gateway.state
    return UserList(users=[
        UserOut(user_id=u.user_id, display_name=u.display_name, timezone=u.timezone, tier=u.tier,
                created_at=u.created_at,
                accounts=[UserAccount(channel=c, account_id=a) for c, a in state.identities.accounts(u.user_id)])
        for u in state.users.all()
    ])  # fmt: skip


def _pairing(call: Call) -> AccessStore:
    return AccessStore(call.gateway.state)


async def pairing(call: Call) -> PairingList:
    return PairingList(pending=[
        Pairing(code=p.code, channel=p.channel, account_id=p.account_id, display_name=p.display_name,
                created_at=p.created_at, expires_at=p.expires_at, requests=p.requests)
        for p in _pairing(call).pending()
    ])  # fmt: skip


def _decide(action: str) -> Handler:
    async def decide(call: Call) -> PairingDone:
        code = call.param("code")
        store = _pairing(call)
        req = (store.approve(code) if action == "approved" else store.deny(code)) if len(code) <= 64 else None
        if req is None:
            raise ApiError(404, "no such pairing code (unknown, answered or expired)")
        return PairingDone(code=req.code, action=action, channel=req.channel, account_id=req.account_id,
                           display_name=req.display_name)  # fmt: skip

    return decide


ERRORS = (401, 403)
ROUTES = [
    Route("GET", "/api/users", "every user", UserList, users, operator=True, tag="operator", errors=ERRORS),
    Route("GET", "/api/pairing", "pending pairing requests", PairingList, pairing, operator=True, tag="operator",
          errors=ERRORS),
    Route("POST", "/api/pairing/{code}/approve", "approve a pairing code: its sender may talk to kith",
          PairingDone, _decide("approved"), operator=True, tag="operator", errors=(*ERRORS, 404)),
    Route("POST", "/api/pairing/{code}/deny", "deny a pairing code", PairingDone, _decide("denied"),
          operator=True, tag="operator", errors=(*ERRORS, 404)),
]
