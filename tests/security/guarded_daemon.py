"""Shared by the trust-boundary tests of the HTTP surface: a daemon whose job bus runs no workers (so
every job an attacker managed to enqueue stays visible), a user with something to steal, the operator
credential, and what changed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.app import Gateway
from gateway.http.auth import token_path
from gateway.types import ConversationKind, InboundMessage
from tests.storage import count_rows

# Jobs an operator endpoint can start: what a cross-site request must never manage to queue.
OPERATOR_JOBS = ("memory.rebuild", "distill_short", "distill_mid", "distill_long")
EXAMPLE_PARAMS = {"tier": "long", "name": "app.js"}


def idle_bus(**server: Any) -> dict[str, Any]:
    """Config overrides: no in-process workers (queued jobs stay queued), the given server keys."""
    return {"bus": {"workers_in_process": False}, "server": {"port": 0, **server}}


async def web_user(gw: Gateway, account: str, name: str, said: str) -> str:
    """The id of the daemon's one user, created by a trusted web-chat DM ``said``: what it said is in
    the live session and memory, so a leak of it shows in what an attacker reads."""
    await gw.handle_inbound(InboundMessage(channel="websocket", account_id=account, conversation_id=account,
                                           text=said, kind=ConversationKind.DM, display_name=name, trusted=True))
    (row,) = gw.state.users.all()
    return row.user_id


def operator_token(gw: Gateway) -> str:
    return token_path(gw.config).read_text().strip()


def operator_auth(gw: Gateway) -> dict[str, str]:
    """The request header that carries the operator credential."""
    return {"Authorization": f"Bearer {operator_token(gw)}"}


def every_route(app: web.Application) -> list[tuple[str, str]]:
    """(method, concrete path) of every route of the app, path parameters filled with real values."""
    out = set()
    for route in app.router.routes():
        resource = route.resource
        if resource is None or route.method == "HEAD":
            continue
        path = re.sub(r"\{(\w+)[^}]*\}", lambda m: EXAMPLE_PARAMS.get(m.group(1), "x"), resource.canonical)
        out.add((route.method, path))
    return sorted(out)


@dataclass(frozen=True)
class Footprint:
    """What an operator request leaves behind: queued operator jobs, distillation runs, users, turns."""

    queued: dict[str, int]
    distill_runs: int
    users: int
    turns: int


async def footprint(gw: Gateway) -> Footprint:
    assert gw.bus is not None
    queued = {q.name: q.pending + q.in_flight + q.delayed for q in await gw.bus.status() if q.name in OPERATOR_JOBS}
    return Footprint(
        queued={name: queued.get(name, 0) for name in OPERATOR_JOBS},
        distill_runs=len(gw.state.distill_runs.status(None)),
        users=count_rows(gw.state, "SELECT COUNT(*) FROM users"),
        turns=count_rows(gw.state, "SELECT COUNT(*) FROM turns"),
    )
