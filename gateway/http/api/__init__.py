"""The person-facing HTTP/JSON API under ``/api`` (docs/api.md): one module per concept, each with a
``ROUTES`` list of declarations (``spec.Route``) that both serve the route and describe it in the
OpenAPI document served at ``/api/openapi.json`` (``gateway/http/openapi.py``).

Who may call what is decided only by ``gateway/http/principal.py``: a person reaches their own
``/api/users/{uid}/...`` (``me`` names them), the operator every user's, and routes declared
``operator=True`` (``x-operator`` in the document) need the operator role. Imports: the host
(``gateway.*``), never ``adapters`` or ``plugins``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ConfigDict, Field

from gateway.http import openapi
from gateway.http.api import (
    curation,
    facts,
    files,
    hygiene,
    me,
    operator,
    recall,
    schedule,
    sessions,
    turns,
    uploads,
)
from gateway.http.api.spec import Answer, Body, Call, Route, install_routes, json_errors

if TYPE_CHECKING:
    from gateway.app import Gateway


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


SIGNIN = [
    Route("POST", "/api/session/local", "sign the single local user in (loopback without server.token only)",
          SignedIn, body=LocalSignIn, public=True, tag="sign-in", errors=(400, 403),
          description="Sets the kith_session cookie; the client_id is the page's WebSocket client id."),
    Route("POST", "/api/session/logout", "sign out (clears the cookie)", SignedOut, public=True, tag="sign-in",
          errors=()),
    Route("POST", "/api/session/links", "mint a one-time sign-in link for a user (operator)", SignInLink,
          body=LinkRequest, operator=True, tag="sign-in", errors=(400, 401, 403, 404)),
]


def table() -> list[Route]:
    """Every /api route: those this package serves, and the sign-in routes served by signin.py."""
    served = [*me.ROUTES, *sessions.ROUTES, *files.ROUTES, *facts.ROUTES, *recall.ROUTES, *curation.ROUTES,
              *turns.ROUTES, *operator.ROUTES, *uploads.ROUTES, *schedule.ROUTES, *hygiene.ROUTES]  # fmt: skip
    return [*served, *SIGNIN, OPENAPI]


@functools.cache
def served_document() -> OpenApiDocument:
    """The document as served: built once per process (the table does not change while it runs)."""
    return OpenApiDocument.model_validate(openapi.document(table()))


async def _document(call: Call) -> OpenApiDocument:
    return served_document()


OPENAPI = Route("GET", "/api/openapi.json", "this document", OpenApiDocument, _document, public=True, tag="meta",
                errors=())  # fmt: skip


def install(app: web.Application, gateway: Gateway) -> None:
    """Serve the API on ``app``; its JSON-errors middleware goes first, so even the guard's refusals
    of an /api request (Host, Origin, content type) and the CSRF check answer JSON."""
    app.middlewares.insert(0, json_errors)
    install_routes(app, gateway, table())
