"""Web sign-in: one-time sign-in links, the ``kith_session`` cookie, and the session routes.

* ``GET /signin?t=TOKEN``: a one-time link (15 minutes, single use) from ``/web`` on a linked channel or
  ``kith users login-link``. It sets the cookie and redirects to ``/``. Only a real browser navigation
  (``Sec-Fetch-Mode: navigate``) redeems it: the link-preview fetchers of chat platforms (which open every
  link in a message) would otherwise use up the link before the person clicks it.
* ``POST /api/session/local {"client_id"}``: on loopback without ``server.token`` the local owner is
  signed in automatically (operator role, ``gateway/identity/owner.py``); with ``server.local_owner``
  off, ``websocket:<client_id>`` maps to its own user exactly as the WebSocket ``hello`` does.
* ``POST /api/session/logout``; ``POST /api/session/links {"user", "operator"?}`` (operator) mints a link.

Secrets (link tokens, cookie values) are 256-bit random, stored only as SHA-256 hashes
(``State.web_sessions``) and never logged. Sessions slide: each use within the idle period extends it.
A session of a user who no longer exists (deleted, or merged into another) identifies nobody. See
docs/security.md#sign-in.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from aiohttp import web

from gateway.config import ServerConfig, canonical_host, is_loopback_host
from gateway.http import csrf
from gateway.http.guard import LOOPBACK_NAMES, json_object, proxy_header, split_host
from gateway.http.principal import (
    COOKIE_RESOLVER,
    SESSION_COOKIE,
    CookieResolver,
    Principal,
    csrf_for,
    principal_or_none,
    require_operator_principal,
)
from gateway.identity.owner import local_person
from gateway.types import ConversationKind, InboundMessage

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.signin")

LINK_TTL = timedelta(minutes=15)
SESSION_IDLE = timedelta(days=14)  # signed out after this long without a request
TOUCH_AFTER = timedelta(minutes=5)  # a session's expiry moves at most this often (one write, not one per request)
MAX_SECRET_CHARS = 128
# The same client ids as the WebSocket hello accepts (adapters/websocket.py, docs/protocol.md).
CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# The raw cookie of a valid session (logout), and whether its expiry moved (send the cookie again).
_SESSION_SECRET: web.RequestKey[str] = web.RequestKey("kith_session_secret", str)
_REFRESH: web.RequestKey[bool] = web.RequestKey("kith_session_refresh", bool)
NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class SigninLink:
    url: str
    user_id: str
    operator: bool
    expires_at: datetime


def base_url(server: ServerConfig, port: int | None) -> str:
    """Where people reach the web app: ``server.public_url``, else the first public name at the port the
    daemon serves, else the concrete address it is bound to (a LAN address), else loopback."""
    if server.public_url:
        return server.public_url
    port = port or server.port
    bound = canonical_host(server.host) if server.host not in ("", "0.0.0.0", "::") else None
    if server.public_names:
        host = server.public_names[0]
    elif bound is not None and not is_loopback_host(server.host):
        host = bound
    else:
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def mint_link(gateway: Services, user_id: str, *, operator: bool, issued_by: str) -> SigninLink:
    """A new one-time sign-in link for ``user_id`` (who must exist). The token lives only in the link."""
    now = datetime.now(UTC)
    token = secrets.token_urlsafe(32)
    store = gateway.state.web_sessions
    store.expire(now)
    store.add_signin(secret_hash(token), user_id=user_id, operator=operator, issued_by=issued_by, at=now,
                     expires_at=now + LINK_TTL)  # fmt: skip
    log.info("issued a %ssign-in link for user %s (%s); valid for %d minutes",
             "operator " if operator else "", user_id, issued_by, LINK_TTL.seconds // 60)  # fmt: skip
    link = f"{base_url(gateway.config.server, gateway.port)}/signin?t={quote(token)}"
    return SigninLink(url=link, user_id=user_id, operator=operator, expires_at=now + LINK_TTL)


def revoke_user(gateway: Services, user_id: str) -> int:
    """Sign every browser of ``user_id`` out and void its unused links (a deleted user, a role change)."""
    return gateway.state.web_sessions.revoke_user(user_id)


def is_https(gateway: Services, request: web.Request) -> bool:
    """Whether the browser reached us over https: TLS on this socket, a trusted proxy's
    ``X-Forwarded-Proto`` (proxy headers reach a handler only with ``server.token`` set: the guard refuses
    them otherwise), or the Host of an https ``server.public_url``."""
    if request.secure:
        return True
    server = gateway.config.server
    forwarded = request.headers.get("X-Forwarded-Proto", "")
    if server.token is not None and forwarded.split(",")[0].strip().lower() == "https":
        return True
    if server.public_url and server.public_url.lower().startswith("https://"):
        host = split_host(request.headers.get("Host", ""))
        public = canonical_host(urlsplit(server.public_url).hostname or "")
        return host is not None and host[0] == public
    return False


def is_local(gateway: Services, request: web.Request) -> bool:
    """Loopback without ``server.token``: the TCP peer is this machine, the Host is a loopback name (not a
    public name or a rebound DNS name), and no proxy speaks for someone else."""
    host = split_host(request.headers.get("Host", ""))
    return (gateway.config.server.token is None and is_loopback_host(request.remote or "")
            and host is not None and host[0] in LOOPBACK_NAMES and proxy_header(request) is None)  # fmt: skip


def set_session_cookie(gateway: Services, request: web.Request, response: web.StreamResponse, secret: str) -> None:
    response.set_cookie(SESSION_COOKIE, secret, max_age=int(SESSION_IDLE.total_seconds()), path="/",
                        httponly=True, samesite="Strict", secure=is_https(gateway, request))  # fmt: skip


def clear_session_cookie(gateway: Services, request: web.Request, response: web.StreamResponse) -> None:
    response.del_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="Strict", secure=is_https(gateway, request))


def _start_session(gateway: Services, request: web.Request, user_id: str, *, operator: bool, via: str) -> str:
    """A new session (never the one the browser may still hold: no session fixation); the browser's
    previous session, if any, ends here rather than lingering until it expires."""
    now = datetime.now(UTC)
    store = gateway.state.web_sessions
    previous = request.cookies.get(SESSION_COOKIE)
    if previous and len(previous) <= MAX_SECRET_CHARS:
        store.delete(secret_hash(previous))
    store.expire(now)
    secret = secrets.token_urlsafe(32)
    store.create(secret_hash(secret), user_id=user_id, operator=operator, via=via, at=now,
                 expires_at=now + SESSION_IDLE)  # fmt: skip
    return secret


def resolver(gateway: Services) -> CookieResolver:
    """The cookie -> Principal lookup behind ``principal()`` (installed as ``COOKIE_RESOLVER``)."""

    def resolve(request: web.Request) -> Principal | None:
        secret = request.cookies.get(SESSION_COOKIE)
        if not secret or len(secret) > MAX_SECRET_CHARS:
            return None
        now = datetime.now(UTC)
        store, key = gateway.state.web_sessions, secret_hash(secret)
        session = store.get(key, now)
        if session is None:
            return None
        if gateway.state.users.get(session.user_id) is None:
            store.delete(key)  # the user was deleted or merged away: this browser is nobody now
            return None
        if session.via == "local" and not is_local(gateway, request):
            return None  # the automatic local sign-in holds only where it was granted: loopback, no token
        if now - session.last_seen_at >= TOUCH_AFTER:
            store.touch(key, at=now, expires_at=now + SESSION_IDLE)
            request[_REFRESH] = True
        request[_SESSION_SECRET] = secret
        return Principal(user_id=session.user_id, operator=session.operator, via="cookie")

    return resolve


def routes(gateway: Services) -> list[web.RouteDef]:
    async def signin(request: web.Request) -> web.StreamResponse:
        token = request.query.get("t", "")
        if request.method != "GET" or request.headers.get("Sec-Fetch-Mode", "").lower() != "navigate":
            # A link preview, a script, a very old browser, a HEAD (a link checker, a mail scanner: the
            # answer has no body, so no one could be signed in by it): the link is left unused.
            return web.Response(text=_OPEN_IN_BROWSER, content_type="text/html", headers=NO_STORE)
        grant = None
        if token and len(token) <= MAX_SECRET_CHARS:
            grant = gateway.state.web_sessions.take_signin(secret_hash(token), datetime.now(UTC))
        if grant is None or gateway.state.users.get(grant.user_id) is None:
            log.info("refused a sign-in link: unknown, used or expired")
            return web.Response(status=410, text=_LINK_GONE, content_type="text/html", headers=NO_STORE)
        secret = _start_session(gateway, request, grant.user_id, operator=grant.operator, via="link")
        log.info("user %s signed in to the web app%s (link from %s)", grant.user_id,
                 " with the operator role" if grant.operator else "", grant.issued_by)  # fmt: skip
        response = web.Response(status=303, headers={**NO_STORE, "Location": "/"})
        set_session_cookie(gateway, request, response, secret)
        return response

    async def local(request: web.Request) -> web.Response:
        if not is_local(gateway, request):
            raise web.HTTPForbidden(text="automatic sign-in works only on loopback (localhost, 127.0.0.1, [::1]) "
                                         "while server.token is not set; use a sign-in link "
                                         "(docs/security.md#sign-in)")
        body = await json_object(request)
        client_id, name = body.get("client_id"), body.get("name", "")
        if not isinstance(client_id, str) or not CLIENT_ID.match(client_id):
            raise web.HTTPBadRequest(text="client_id must be 1-128 characters of [A-Za-z0-9._:-]")
        if not isinstance(name, str) or len(name) > 100:
            raise web.HTTPBadRequest(text="name must be a string of at most 100 characters")
        who, held = principal_or_none(request), request.get(_SESSION_SECRET)
        if who is not None and who.via == "cookie" and held:
            # Already signed in (another tab of the page, or a sign-in link opened on this machine): keep
            # that session, so it is not swapped under the person and the other tabs' CSRF token stays valid.
            return web.json_response({"user_id": who.user_id, "operator": who.operator, "csrf": csrf_for(held)},
                                     headers=NO_STORE)  # fmt: skip
        if gateway.config.server.local_owner:
            # A new browser is the one owner; its account joins them at the hello. A client id someone
            # already has (linked on purpose, or a person of its own from before) stays theirs.
            user_id = local_person(gateway.identities, client_id=client_id, name=name)
        else:
            user = gateway.identities.resolve(websocket_client(client_id, name))
            assert user is not None  # resolve creates the user when missing
            user_id = user.user_id
        secret = _start_session(gateway, request, user_id, operator=True, via="local")
        response = web.json_response({"user_id": user_id, "operator": True, "csrf": csrf_for(secret)},
                                     headers=NO_STORE)  # fmt: skip
        set_session_cookie(gateway, request, response, secret)
        return response

    async def logout(request: web.Request) -> web.Response:
        who = principal_or_none(request)
        secret = request.get(_SESSION_SECRET)
        if who is not None and who.via == "cookie" and secret:
            gateway.state.web_sessions.delete(secret_hash(secret))
            log.info("user %s signed out of the web app", who.user_id)
        response = web.json_response({"signed_out": True}, headers=NO_STORE)
        clear_session_cookie(gateway, request, response)
        return response

    async def links(request: web.Request) -> web.Response:
        who = require_operator_principal(request)
        body = await json_object(request)
        user_id, operator = body.get("user"), body.get("operator", False)
        if not isinstance(user_id, str) or not isinstance(operator, bool):
            raise web.HTTPBadRequest(text='want {"user": str, "operator": bool?}')
        if gateway.state.users.get(user_id) is None:
            raise web.HTTPNotFound(text=f"no user {user_id!r}")
        link = mint_link(gateway, user_id, operator=operator,
                         issued_by="operator token" if who.via == "operator-token" else f"operator {who.user_id}")
        return web.json_response({"url": link.url, "user": link.user_id, "operator": link.operator,
                                  "expires_at": link.expires_at.isoformat()}, headers=NO_STORE)  # fmt: skip

    return [web.get("/signin", signin), web.post("/api/session/local", local),
            web.post("/api/session/logout", logout), web.post("/api/session/links", links)]  # fmt: skip


def websocket_client(client_id: str, name: str) -> InboundMessage:
    """The message shape under which the WebSocket adapter resolves a client (its ``hello``)."""
    return InboundMessage(channel="websocket", account_id=client_id, conversation_id=client_id, text="",
                          kind=ConversationKind.DM, display_name=name, timestamp=datetime.now(UTC),
                          trusted=True)  # fmt: skip


def install(app: web.Application, gateway: Services) -> None:
    """Sign-in routes, the cookie resolver behind ``principal()``, the CSRF check, and the sliding cookie.
    After the HTTP guard (``gateway/http/guard.py``), so its Host, Origin and JSON checks run first."""
    app[COOKIE_RESOLVER] = resolver(gateway)
    csrf.install(app)

    @web.middleware
    async def refresh_cookie(request: web.Request, handler: csrf.Handler) -> web.StreamResponse:
        response = await handler(request)
        secret = request.get(_SESSION_SECRET)
        if request.get(_REFRESH) and secret and not response.prepared and SESSION_COOKIE not in response.cookies:
            set_session_cookie(gateway, request, response, secret)
        return response

    app.middlewares.append(refresh_cookie)
    app.router.add_routes(routes(gateway))


_OPEN_IN_BROWSER = """<!doctype html><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>kith sign-in</title><p>Open this sign-in link in your web browser to sign in to kith.</p>
"""
_LINK_GONE = """<!doctype html><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>kith sign-in</title><p>This sign-in link was used already or has expired. Ask for a new one: send
<code>/web</code> to the assistant in a direct conversation.</p>
"""
