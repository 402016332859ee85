"""Operator endpoints of the daemon's HTTP API (``/context``, ``/distill/*``): who may call them.

``Authorization: Bearer <server.token>``, compared in constant time. With no token configured only
loopback clients are served; the server refuses a non-loopback bind without a token anyway.
"""

from __future__ import annotations

import hmac
import ipaddress

from aiohttp import web

from gateway.config import Config


def is_operator(config: Config, request: web.Request) -> bool:
    secret = config.server.token
    if secret is None:
        try:
            return ipaddress.ip_address(request.remote or "").is_loopback
        except ValueError:
            return False
    header = request.headers.get("Authorization", "")
    return header.startswith("Bearer ") and hmac.compare_digest(header[7:].encode(), secret.get_secret_value().encode())


def require_operator(config: Config, request: web.Request) -> None:
    if not is_operator(config, request):
        raise web.HTTPUnauthorized(text="bearer token required", headers={"WWW-Authenticate": "Bearer"})
