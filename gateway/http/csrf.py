"""CSRF check for cookie-authenticated requests: a state change needs ``X-CSRF-Token``.

The session cookie is an ambient credential: the browser attaches it to every request to this server,
whichever page causes the request. The guard (``gateway/http/guard.py``) already refuses foreign
origins and non-JSON bodies; this middleware adds the synchronizer token, so a request that slips past
those (a browser that sends no ``Origin``, a same-site page on another port of a public name) still
changes nothing. Every POST/PUT/PATCH/DELETE that a valid ``kith_session`` cookie authenticates must
carry ``X-CSRF-Token`` equal to the session's token (``principal.csrf_token``, served by
``GET /api/me``); otherwise 403 before the handler runs. Requests with ``Authorization: Bearer`` are
judged by that token alone and need none (no ambient credential); requests without a valid session
are nobody, and the handlers refuse them. ``POST /api/session/local`` starts a new session on loopback
whatever cookie the browser still holds, so it is not checked. See docs/security.md#sign-in.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.http.auth import bearer, tokens_match
from gateway.http.guard import RESPONSE_HEADERS, SAFE_METHODS
from gateway.http.principal import CSRF_HEADER, SESSION_COOKIE, csrf_token
from gateway.util.logthrottle import LogThrottle

log = logging.getLogger("kith.csrf")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
EXEMPT_PATHS = frozenset({"/api/session/local"})


def install(app: web.Application) -> None:
    throttle = LogThrottle(log, 60.0)

    @web.middleware
    async def csrf(request: web.Request, handler: Handler) -> web.StreamResponse:
        if (request.method in SAFE_METHODS or SESSION_COOKIE not in request.cookies or bearer(request) is not None
                or request.path in EXEMPT_PATHS):
            return await handler(request)
        expected = csrf_token(request)  # None: the cookie names no valid session, the request is nobody
        if expected is not None:
            given = request.headers.get(CSRF_HEADER, "")
            if not given or not tokens_match(given, expected):
                throttle.warn("csrf", "refused a %s %s without the session's CSRF token", request.method,
                              request.path[:100])
                return web.Response(status=403, text="missing or wrong X-CSRF-Token: send the token from "
                                                     "GET /api/me with every change (docs/security.md#sign-in).\n",
                                    headers={**RESPONSE_HEADERS, "Cache-Control": "no-store"})
        return await handler(request)

    app.middlewares.append(csrf)
