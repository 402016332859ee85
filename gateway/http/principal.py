"""Who is asking: the one answer every web route (API, console, ``/ws``) asks before it reads or changes
a person's data.

Two credentials exist. The operator token (``Authorization: Bearer``, ``gateway/http/auth.py``) makes
the caller the operator, with no person of its own. The ``kith_session`` cookie (``gateway/http/signin.py``)
makes the caller the person it was issued to, with the operator role when it was issued as such (an
operator sign-in link, or the automatic sign-in of the single local user on loopback without
``server.token``). A handler never looks at either credential itself: it calls :func:`require_user`
with the user id of the URL, which answers 404 to anyone else, so a signed-in person cannot even learn
that another person exists. See docs/security.md#sign-in.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from gateway.http.auth import bearer, is_operator

Via = Literal["cookie", "operator-token"]
SESSION_COOKIE = "kith_session"
CSRF_HEADER = "X-CSRF-Token"


@dataclass(frozen=True)
class Principal:
    user_id: str | None  # the signed-in person; None = the operator token, which stands for no person
    operator: bool  # may see every user, pairing requests and quarantine
    via: Via


OPERATOR = Principal(user_id=None, operator=True, via="operator-token")

# How a request's session cookie becomes a Principal; installed by gateway/http/signin.py on the app so
# this module stays free of storage. Absent (an app without sign-in): cookies identify nobody.
CookieResolver = Callable[[web.Request], Principal | None]
COOKIE_RESOLVER: web.AppKey[CookieResolver] = web.AppKey("cookie_resolver")
# Per-request cache: the cookie is looked up once however often handlers ask.
_RESOLVED: web.RequestKey[Principal | None] = web.RequestKey("kith_principal")


def principal_or_none(request: web.Request) -> Principal | None:
    """The caller, or None when the request carries no valid credential.

    A request that presents a Bearer token is judged by that token alone: a wrong token is nobody, never
    a fall-back to a cookie the browser happened to send along (the CLI and scripts use the token)."""
    if bearer(request) is not None:
        return OPERATOR if is_operator(request) else None
    if _RESOLVED in request:
        return request[_RESOLVED]
    resolver = request.config_dict.get(COOKIE_RESOLVER)  # sub-apps see the main app's resolver
    found = resolver(request) if resolver is not None else None
    request[_RESOLVED] = found
    return found


def principal(request: web.Request) -> Principal:
    """The caller; 401 when the request is from nobody."""
    found = principal_or_none(request)
    if found is None:
        raise web.HTTPUnauthorized(
            text="sign in first: open a sign-in link (/web on a linked channel, or `kith users login-link`), "
                 "or send the operator token (docs/security.md#sign-in)",
            headers={"WWW-Authenticate": 'Bearer realm="kith"'},
        )
    return found


def require_user(request: web.Request, user_id: str) -> Principal:
    """The person ``user_id`` themselves, or the operator. Anyone else gets 404, exactly what an unknown
    user id gets, so the answer does not tell whether ``user_id`` exists."""
    who = principal(request)
    if who.operator or (who.user_id is not None and who.user_id == user_id):
        return who
    raise web.HTTPNotFound(text="no such user")


def resolve_user_id(request: web.Request, uid: str) -> str:
    """A URL's ``{uid}``, where ``me`` names the signed-in person (the operator token has no ``me``: 404)."""
    if uid == "me":
        who = principal(request)
        if who.user_id is None:
            raise web.HTTPNotFound(text="the operator token has no user of its own; name the user")
        return who.user_id
    require_user(request, uid)
    return uid


def require_operator_principal(request: web.Request) -> Principal:
    """The operator (token, or a person signed in with the operator role); 401 for nobody, 403 for a
    person without the role."""
    who = principal(request)
    if not who.operator:
        raise web.HTTPForbidden(text="this needs the operator role (docs/security.md#sign-in)")
    return who


def csrf_for(session_secret: str) -> str:
    """The CSRF token of a session: derived from the cookie's secret, so it is never stored and cannot be
    computed by anyone who does not hold the cookie (the page reads it from ``GET /api/me``)."""
    return hmac.new(session_secret.encode("utf-8", "surrogateescape"), b"kith csrf v1", hashlib.sha256).hexdigest()


def csrf_token(request: web.Request) -> str | None:
    """The token a cookie-authenticated page must send as ``X-CSRF-Token`` on every state change; None
    when the request is not authenticated by a session cookie (the operator token needs none)."""
    who = principal_or_none(request)
    if who is None or who.via != "cookie":
        return None
    return csrf_for(request.cookies[SESSION_COOKIE])
