"""The operator's routes: every user, erasing one, and the pairing queue (approve or deny a stranger's code).

Pairing goes through ``gateway.turn.admission.AccessStore``, the same rules as ``kith pairing``. Erasing runs
``gateway.identity.erase`` in the daemon, which holds the memory index, the job bus and the caches
(``kith users delete`` asks it while a daemon runs).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from gateway.http.api.spec import Answer, ApiError, Call, Handler, Query, Route
from gateway.identity.erase import EraseError, erase_person
from gateway.memory.files.scopes import ScopeError
from gateway.turn.admission import AccessStore


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


class EraseQuery(Query):
    missing_ok: bool = Field(False, description="run every step even when neither the users table nor the files "
                             "know the id any more (an earlier erase whose index step failed)")


class Erased(Answer):
    user_id: str
    rows: dict[str, int] = Field(description="database rows removed, by table")
    files: int
    jobs: int
    points: int = Field(description="memory index points removed")
    log_lines: int
    group_blocks: int = Field(description="turn blocks and quoting lines taken out of group conversations' files")
    accounts: list[str]
    warnings: list[str] = Field(description="steps that could not finish (the others still ran)")


async def erase(call: Call) -> Erased:
    uid = call.user_id(must_exist=False)  # erase_person knows a user by their row or their folder
    query: EraseQuery = call.query
    try:
        report = await erase_person(call.gateway, uid, missing_ok=query.missing_ok)
    except EraseError as exc:
        raise ApiError(404, str(exc)) from None
    except ScopeError as exc:
        raise ApiError(400, str(exc)) from None
    return Erased.model_validate(report.as_dict())


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
    Route("DELETE", "/api/users/{uid}", "erase a person: rows, files, index points, jobs and log lines",
          Erased, erase, query=EraseQuery, operator=True, tag="operator", errors=(400, *ERRORS, 404),
          user_must_exist=False, description="The same erase as `kith users delete` (docs/users.md)."),
    Route("GET", "/api/pairing", "pending pairing requests", PairingList, pairing, operator=True, tag="operator",
          errors=ERRORS),
    Route("POST", "/api/pairing/{code}/approve", "approve a pairing code: its sender may talk to kith",
          PairingDone, _decide("approved"), operator=True, tag="operator", errors=(*ERRORS, 404)),
    Route("POST", "/api/pairing/{code}/deny", "deny a pairing code", PairingDone, _decide("denied"),
          operator=True, tag="operator", errors=(*ERRORS, 404)),
]
