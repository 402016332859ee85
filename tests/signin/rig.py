"""Shared by the sign-in tests: a real daemon, people created through kith's own message path, a small
route guarded by ``require_user`` (mounted next to the person API, which every test also walks when it
is mounted), and browser-like clients that keep their own cookies."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.cookies import SimpleCookie

import aiohttp
from aiohttp import web

from gateway.app import Gateway
from gateway.config import Config
from gateway.http.principal import SESSION_COOKIE, csrf_for, principal, require_user
from gateway.http.signin import mint_link
from gateway.testing import message

# What a browser sends when a person opens a link; a link previewer sends no Sec-Fetch headers.
NAVIGATE = {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}


@dataclass
class Notes:
    """What the guarded test route changed: a forged request must never add to it."""

    written: list[tuple[str, str]] = field(default_factory=list)


def guarded_routes(notes: Notes) -> list[web.RouteDef]:
    async def whoami(request: web.Request) -> web.Response:
        who = principal(request)
        return web.json_response({"user_id": who.user_id, "operator": who.operator, "via": who.via})

    async def read(request: web.Request) -> web.Response:
        uid = request.match_info["uid"]
        require_user(request, uid)
        return web.json_response({"user_id": uid, "notes": [t for u, t in notes.written if u == uid]})

    async def write(request: web.Request) -> web.Response:
        uid = request.match_info["uid"]
        require_user(request, uid)
        body = await request.json()
        notes.written.append((uid, str(body.get("text"))))
        return web.json_response({"ok": True})

    return [web.get("/t/whoami", whoami), web.get("/t/users/{uid}/notes", read),
            web.post("/t/users/{uid}/notes", write), web.put("/t/users/{uid}/notes", write),
            web.patch("/t/users/{uid}/notes", write), web.delete("/t/users/{uid}/notes", write)]  # fmt: skip


@asynccontextmanager
async def daemon(config: Config, notes: Notes | None = None) -> AsyncIterator[Gateway]:
    """A real gateway (port 0) with the guarded test routes mounted next to everything it serves."""
    gw = Gateway(config, entry_points=False)
    gw.http_app.router.add_routes(guarded_routes(notes if notes is not None else Notes()))
    await gw.__aenter__()
    try:
        yield gw
    finally:
        await gw.close()


async def person(gw: Gateway, account: str, channel: str = "websocket") -> str:
    """The user id of a person who said hello on ``channel`` (created on first contact)."""
    await gw.handle_inbound(message("hello", account=account, channel=channel))
    user = gw.identities.lookup(channel, account)
    assert user is not None
    return user


def url(gw: Gateway, path: str) -> str:
    return f"http://127.0.0.1:{gw.port}{path}"


def browser() -> aiohttp.ClientSession:
    """A client that keeps cookies for 127.0.0.1 like a browser (an IP host needs the lenient jar)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


def session_cookie(http: aiohttp.ClientSession) -> str | None:
    return next((c.value for c in http.cookie_jar if c.key == SESSION_COOKIE and c.value), None)


def set_cookie(resp: aiohttp.ClientResponse) -> SimpleCookie:
    """The response's Set-Cookie headers, parsed (attributes included)."""
    jar: SimpleCookie = SimpleCookie()
    for header in resp.headers.getall("Set-Cookie", []):
        jar.load(header)
    return jar


async def open_link(http: aiohttp.ClientSession, link: str) -> aiohttp.ClientResponse:
    """Open a sign-in link as a browser does (no redirect followed, so the answer can be inspected)."""
    async with http.get(link, headers=NAVIGATE, allow_redirects=False) as resp:
        await resp.read()
        return resp


async def sign_in(gw: Gateway, http: aiohttp.ClientSession, user_id: str, *, operator: bool = False) -> str:
    """Sign ``http`` in as ``user_id`` through a real one-time link; returns the session's CSRF token."""
    resp = await open_link(http, mint_link(gw, user_id, operator=operator, issued_by="test").url)
    assert resp.status == 303, resp.status
    secret = session_cookie(http)
    assert secret is not None
    return csrf_for(secret)


def person_api_urls(gw: Gateway, uid: str) -> list[tuple[str, str]]:
    """(method, URL path) of every route under ``/api/users/{uid}/`` the daemon serves (the person API,
    when mounted) and the guarded test routes, with ``uid`` filled in and other parameters made up."""
    out = set()
    for route in gw.http_app.router.routes():
        resource = route.resource
        if resource is None or route.method == "HEAD":
            continue
        canonical = resource.canonical
        if not canonical.startswith(("/api/users/{uid}", "/t/users/{uid}")):
            continue
        path = canonical.replace("{uid}", uid)
        path = re.sub(r"\{(\w+)[^}]*\}", lambda m: {"path": "USER.md", "id": "1"}.get(m.group(1), "x1"), path)
        out.add((route.method, path))
    return sorted(out)
