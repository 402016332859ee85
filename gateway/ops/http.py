"""``GET /metrics``: the counters of ``gateway/ops/metrics.py`` plus the levels read at scrape time.

Who may scrape (docs/operations.md#metrics): the HTTP guard (Host, proxy headers, Origin) runs first
as for every route. Then, without ``server.token`` the daemon is reachable from this machine only
(a non-loopback bind needs a token, proxied requests are refused), and ``/metrics`` is open unless
``metrics.token`` is set; with ``server.token`` (the daemon may be published beyond loopback) it needs
``metrics.token`` or the operator credential. Prometheus then holds only the scrape token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.http.auth import bearer, tokens_match
from gateway.http.principal import principal_or_none
from gateway.ops.metrics import REGISTRY
from gateway.ops.scrape import render_levels

if TYPE_CHECKING:
    from gateway.services import Services

def may_scrape(request: web.Request, gateway: Services) -> bool:
    config = gateway.config
    own = config.metrics.token
    given = bearer(request)
    if own is not None and given is not None and tokens_match(given, own.get_secret_value()):
        return True
    if config.server.token is None and own is None:
        return True  # loopback only: the guard refused foreign Host names and proxied requests already
    who = principal_or_none(request)
    return who is not None and who.operator


def routes(gateway: Services) -> list[web.RouteDef]:
    async def metrics(request: web.Request) -> web.Response:
        if not gateway.config.metrics.enabled:
            raise web.HTTPNotFound(text="metrics are off (metrics.enabled)")
        if not may_scrape(request, gateway):
            raise web.HTTPUnauthorized(
                text="/metrics needs Authorization: Bearer <metrics.token> (or the operator token) "
                     "(docs/operations.md#metrics)",
                headers={"WWW-Authenticate": 'Bearer realm="kith metrics"'},
            )
        body = generate_latest(REGISTRY) + await render_levels(gateway)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"})

    return [web.get("/metrics", metrics)]



