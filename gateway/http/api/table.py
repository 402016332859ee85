"""The host's own ``/api`` table, registered through ``gateway_register_routes`` as a built-in plugin
(exactly as a plugin registers its routes, ``registry.py``), and the OpenAPI document of a gateway.

The document lists every registered route, plus the routes other modules serve themselves and
declare here for the document: the sign-in routes (``gateway/http/signin.py``: they set and clear the
cookie) and ``GET /healthz`` (``gateway/app.py``). What the daemon serves outside the document, and
why, is the list in docs/api.md ("Routes outside the API"); tests/api/test_openapi.py walks the
router of a started gateway against both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ConfigDict, Field

from gateway.hookspecs import hookimpl
from gateway.http import openapi
from gateway.http.api import (
    approvals,
    attention,
    curation,
    explain,
    facts,
    files,
    hygiene,
    index,
    me,
    operator,
    recall,
    schedule,
    session_manage,
    session_search,
    sessions,
    setup,
    turns,
    uploads,
)
from gateway.http.api.registry import ROUTES, RouteRegistry
from gateway.http.api.spec import Answer, Body, Call, Route, install_routes, json_errors
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services


class OpenApiDocument(Answer):
    model_config = ConfigDict(extra="allow")
    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]


# Served by gateway/http/signin.py; declared here so the document lists every /api route.
class LocalSignIn(Body):
    client_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    name: str = Field("", max_length=100)


class SignedIn(Answer):
    user_id: str
    operator: bool
    csrf: str


class SignedOut(Answer):
    signed_out: bool


class LinkRequest(Body):
    user: str = Field(min_length=1, max_length=200)
    operator: bool = False


class SignInLink(Answer):
    url: str
    user: str
    operator: bool
    expires_at: str


# Served by gateway/app.py (a probe asks it without credentials, so it stays at its well-known path).
class Health(Answer):
    model_config = ConfigDict(extra="allow")
    status: str = Field(description="ok, or degraded: the daemon answers but something is not at full service")
    degraded: list[str] = Field(description="one line per reason for degraded")
    uptime_s: float
    model: dict[str, Any] = Field(description="{provider, ready}")
    adapters: dict[str, dict[str, Any]] = Field(description="per channel: state, restarts, last_error, ...")
    plugin_failures: dict[str, int] = Field(description="isolated plugin failures by plugin")
    mcp: dict[str, Any]


DESCRIBED = [
    Route("POST", "/api/session/local", "sign the single local user in (loopback without server.token only)",
          SignedIn, body=LocalSignIn, public=True, tag="sign-in", errors=(400, 403),
          description="Sets the kith_session cookie; the client_id is the page's WebSocket client id."),
    Route("POST", "/api/session/logout", "sign out (clears the cookie)", SignedOut, public=True, tag="sign-in",
          errors=()),
    Route("POST", "/api/session/links", "mint a one-time sign-in link for a user (operator)", SignInLink,
          body=LinkRequest, operator=True, tag="sign-in", errors=(400, 401, 403, 404)),
    Route("GET", "/healthz", "whether the daemon is up, and what is not at full service", Health, public=True,
          tag="meta", errors=(), description="For probes and `kith doctor`; no credential needed."),
]


def served() -> list[Route]:
    """Every /api route the host serves itself."""
    # session_search before sessions: its static /sessions/search must win over a /sessions/{sid}.
    return [*me.ROUTES, *session_search.ROUTES, *sessions.ROUTES, *session_manage.ROUTES, *files.ROUTES,
            *facts.ROUTES, *recall.ROUTES, *curation.ROUTES, *turns.ROUTES, *explain.ROUTES, *operator.ROUTES,
            *index.ROUTES, *uploads.ROUTES, *approvals.ROUTES,
            *schedule.ROUTES, *hygiene.ROUTES, *attention.ROUTES, *setup.ROUTES, OPENAPI]  # fmt: skip


@hookimpl(tryfirst=True)
def gateway_register_routes(register: RouteRegistry) -> None:
    """The host's table goes first, so a plugin route that takes one of its paths is the one reported."""
    for route in served():
        register(route)


DOCUMENT: StashKey[OpenApiDocument] = StashKey()


def document_of(gateway: Services) -> OpenApiDocument:
    """The gateway's document, built on first request (the routes do not change while it runs)."""
    found = gateway.stash.get(DOCUMENT)
    if found is None:
        routes = [*gateway.stash[ROUTES].values(), *DESCRIBED]
        found = gateway.stash.setdefault(DOCUMENT, OpenApiDocument.model_validate(openapi.document(routes)))
    return found


async def _document(call: Call) -> OpenApiDocument:
    return document_of(call.gateway)


OPENAPI = Route("GET", "/api/openapi.json", "this document", OpenApiDocument, _document, public=True, tag="meta",
                errors=())  # fmt: skip


def install(app: web.Application) -> None:
    """The API's JSON-errors middleware goes first, so even the guard's refusals of an /api request
    (Host, Origin, content type) and the CSRF check answer JSON."""
    app.middlewares.insert(0, json_errors)


def mount(app: web.Application, gateway: Services, routes: list[Route]) -> None:
    """Serve the registered routes (``Gateway.start``, once the plugins have registered theirs)."""
    install_routes(app, gateway, routes)
