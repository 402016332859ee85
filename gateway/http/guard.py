"""The HTTP guard: one aiohttp middleware in front of every route of the daemon (web chat, ``/ws``,
``/healthz``, ``/api`` with the routes plugins register, platform webhooks).

In order, before any handler runs (and so before a WebSocket upgrade):

1. **Host.** The ``Host`` header must name this server: ``localhost``, ``127.0.0.1``, ``[::1]`` (any
   port), the bound address when it is a concrete one, ``server.public_names`` and the host of a
   configured Telegram webhook URL. A web page on an attacker's DNS name that was re-pointed at
   127.0.0.1 (DNS rebinding) carries the attacker's name here and gets 421.
2. **Proxies.** Without ``server.token``, a request carrying ``Forwarded``, ``X-Forwarded-*``,
   ``X-Real-IP`` or similar is refused (403): behind a reverse proxy every client looks like loopback.
3. **Origin.** When a browser says where a request comes from, that origin must be one of ours:
   ``server.allowed_origins``, or http(s) on a loopback name or a public name at the server's own
   port (public names also on the scheme's default port, as served by a proxy). Never compared with
   the request's own Host, which the attacker chooses in a rebinding attack.
4. **Content type.** State-changing methods need ``Content-Type: application/json`` (415), which no
   HTML form can send and no cross-site ``fetch`` can send without a CORS preflight that kith never
   answers. Platform webhooks are exempt: they carry their own signature or secret.

Who may call a route is not the guard's to say: every ``/api`` route asks ``gateway/http/principal.py``
(``spec.Route.operator`` is the one operator check). Refusals are plain text with the reason and the
docs anchor; they are logged at most once a minute per kind, so a page hammering the daemon cannot
flood the log. Every answer says it may not be framed
or embedded by another site. See docs/security.md.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiohttp import web

from gateway.config import Config, canonical_host, is_loopback_host, parse_origin
from gateway.http.auth import OPERATOR_TOKEN, ensure_operator_token
from gateway.util.logthrottle import LogThrottle

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.httpguard")

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Headers a reverse proxy or CDN adds to say who the real client is.
PROXY_HEADERS = ("forwarded", "x-real-ip", "x-client-ip", "true-client-ip", "cf-connecting-ip",
                 "cf-connecting-ipv6", "x-cluster-client-ip", "fastly-client-ip", "x-original-forwarded-for", "via",
                 "x-proxyuser-ip", "fly-client-ip", "x-azure-clientip", "x-azure-socketip",
                 "x-appengine-user-ip")  # fmt: skip
# Envoy (and Istio, Contour, Ambassador on top of it) marks what it forwards with x-envoy-* headers,
# the client's address in ``x-envoy-external-address``.
PROXY_PREFIXES = ("x-forwarded-", "x-envoy-")
LOG_INTERVAL_S = 60.0
# On every answer: no other site may frame the web chat (clickjacking a user into typing "/link CODE")
# or embed an API answer as a resource.
RESPONSE_HEADERS = {"X-Frame-Options": "DENY", "Cross-Origin-Resource-Policy": "same-origin",
                    "X-Content-Type-Options": "nosniff"}

# Routes whose body is a file of its own type (POST /api/uploads): they need a signed-in person, and
# a cookie-authenticated one the CSRF token (a header no form can send), instead of the JSON rule.
RAW_BODY_PATHS = frozenset({"/api/uploads"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def split_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` header -> (canonical host, port or None); None when it is not a valid host[:port]."""
    v = value.strip()
    if v.startswith("["):
        end = v.find("]")
        host, rest = v[: end + 1], v[end + 1 :]
        if end < 0:
            return None
    else:
        host, sep, port_text = v.rpartition(":")
        host, rest = (host, ":" + port_text) if sep else (v, "")
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and int(rest[1:]) <= 65535):
        return None
    canonical = canonical_host(host)
    return (canonical, int(rest[1:]) if rest else None) if canonical else None


class Policy:
    """Which Host names and browser origins are this server's, computed once from the config."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.public_names = self._public_names(config)
        self.allowed_origins = frozenset(o for o in map(parse_origin, config.server.allowed_origins) if o)
        # Platform webhooks are authenticated by the platform's secret or signature, not by a browser;
        # each channel's section says which paths its platform calls (gateway.channels.ChannelConfig).
        channels = config.channels.sections().values()
        self.webhook_paths = frozenset(path for channel in channels for path in channel.webhook_paths())

    @staticmethod
    def _public_names(config: Config) -> frozenset[str]:
        names = set(config.server.public_names)
        host = config.server.host
        if host not in ("", "0.0.0.0", "::") and not is_loopback_host(host):
            names.add(canonical_host(host) or host)  # a concrete bind address is how clients reach it
        for url in (url for channel in config.channels.sections().values() for url in channel.public_urls()):
            try:
                hook_host = canonical_host(urlsplit(url).hostname or "")
            except ValueError:
                hook_host = None
            if hook_host:
                names.add(hook_host)  # a platform calls its webhook URL, with that host in the Host header
        return frozenset(names - LOOPBACK_NAMES)

    def host_allowed(self, value: str | None) -> bool:
        parsed = split_host(value) if value else None
        return parsed is not None and (parsed[0] in LOOPBACK_NAMES or parsed[0] in self.public_names)

    def origin_allowed(self, origin: str, port: int | None) -> bool:
        """Whether a browser origin is one of ours; ``port`` is the port the server really listens on."""
        parsed = parse_origin(origin)
        if parsed is None:
            return False  # "null" (sandboxed frames, file:), paths, other schemes
        if parsed in self.allowed_origins:
            return True
        scheme, host, origin_port = parsed
        own = port or self.config.server.port
        if host in LOOPBACK_NAMES:
            return origin_port == own  # another port on this machine is another (possibly hostile) site
        if host in self.public_names:
            return origin_port in (own, 443 if scheme == "https" else 80)
        return False


def proxy_header(request: web.Request) -> str | None:
    for name in request.headers:
        low = name.lower()
        if low in PROXY_HEADERS or low.startswith(PROXY_PREFIXES):
            return name
    return None


def _refuse(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", headers={**RESPONSE_HEADERS, "Cache-Control": "no-store"})


def _route_path(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else request.path


def _printable(value: str) -> str:
    return value[:100].encode("ascii", "backslashreplace").decode("ascii")


#: The guard's policy, computed once per app; handlers that check an origin themselves (``/ws``) use it.
HTTP_POLICY: web.AppKey[Policy] = web.AppKey("http_policy", Policy)


def install(app: web.Application, gateway: Services) -> None:
    """Put the guard in front of every route of ``app`` and load the operator credential at startup."""
    config = gateway.config
    policy = app[HTTP_POLICY] = Policy(config)
    throttle = LogThrottle(log, LOG_INTERVAL_S)

    async def load_token(app: web.Application) -> None:
        # At startup (the data dir exists by then), before the server accepts a connection.
        app[OPERATOR_TOKEN] = ensure_operator_token(config)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host")
        if not host:
            return _refuse(400, "a Host header is required (docs/security.md#host-and-origin).")
        if not policy.host_allowed(host):
            throttle.warn("host", "refused a request for unknown Host %r (add it to server.public_names if "
                          "it is this server's name)", _printable(host))
            return _refuse(421, "kith does not answer to this Host name. If it is this server's name, add it "
                                "to server.public_names (docs/security.md#host-and-origin).")
        if config.server.token is None and (header := proxy_header(request)) is not None:
            throttle.warn("proxy", "refused a proxied request (%s header) while server.token is not set", header)
            return _refuse(403, f"kith refuses proxied requests ({header} header) while server.token is not "
                                "set: behind a proxy every client looks local. Set server.token "
                                "(docs/security.md#proxies).")
        origin = request.headers.get("Origin")
        if origin is not None and not policy.origin_allowed(origin, gateway.port):
            throttle.warn("origin", "refused a request from origin %r", _printable(origin))
            return _refuse(403, "cross-origin request refused: this Origin is not allowed "
                                "(server.allowed_origins, docs/security.md#host-and-origin).")
        path = _route_path(request)
        unsafe = (request.method not in SAFE_METHODS and path not in policy.webhook_paths
                  and path not in RAW_BODY_PATHS)
        try:
            if unsafe and request.content_type != "application/json":
                return _refuse(415, "send the request body as JSON with Content-Type: application/json "
                                    "(docs/security.md#host-and-origin).")
            response = await handler(request)
        except web.HTTPException as exc:  # 401, 404, 400...: an answer like any other
            for name, value in RESPONSE_HEADERS.items():
                exc.headers.setdefault(name, value)
            raise
        if not response.prepared:  # a WebSocket has sent its headers already
            for name, value in RESPONSE_HEADERS.items():
                response.headers.setdefault(name, value)
        return response

    app.middlewares.append(guard)
    app.on_startup.append(load_token)


async def json_object(request: web.Request, *, empty_ok: bool = False) -> dict[str, Any]:
    """The request body as a JSON object. The content type is checked here too, not only by the
    guard: ``request.json()`` parses any body, and a handler may be mounted on another app."""
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(text="send the request body as JSON with Content-Type: application/json")
    if empty_ok and not request.can_read_body:
        return {}
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="body must be JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="body must be a JSON object")
    return body
