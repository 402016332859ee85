"""One declaration per route of the person-facing API: its method and path, who may call it, and the
pydantic models of its query, body and answer. The same declaration validates each request, serialises
each answer and writes the route into the served OpenAPI document (``gateway/http/openapi.py``), so a
route cannot be served undocumented or documented differently from what it accepts.

Errors are JSON ``{"error": "<code>", "message": "..."}`` with the right status. Bad input is a 400
(never a 500): query and body are validated against the declared models before the handler runs, and
a handler raises ``ApiError`` (or one of aiohttp's ``HTTPException``) for what only it can tell.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.http.guard import json_object
from gateway.http.principal import Principal, principal, require_operator_principal, resolve_user_id

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.api")

# Status -> the error code a client branches on.
ERROR_CODES = {
    400: "invalid", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    409: "conflict", 410: "gone", 413: "too_large", 415: "unsupported_media_type", 421: "misdirected",
    429: "too_many_requests", 500: "internal", 503: "unavailable",
}  # fmt: skip


class ApiError(Exception):
    """An answer other than success, as ``{"error": code, "message": message}`` with ``status``."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or ERROR_CODES.get(status, "error")
        self.message = message


def error_response(status: int, message: str, code: str | None = None,
                   headers: dict[str, str] | None = None) -> web.Response:  # fmt: skip
    body = {"error": code or ERROR_CODES.get(status, "error"), "message": message.strip()}
    return web.json_response(body, status=status, headers={"Cache-Control": "no-store", **(headers or {})})


# The API's models (subclasses of these bases) build their validator and schema on first use, not
# when imported: ``kith run`` imports every route's models at start-up, and most are not used in its
# first minutes (``defer_build``; docs/benchmarks.md, "Footprint").


class Query(BaseModel):
    """Base of query-string models: unknown parameters are ignored (as a browser adds cache busters)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class Body(BaseModel):
    """Base of request bodies: exact JSON types, no unknown fields (a typo is a 400, not a silent no-op)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class Answer(BaseModel):
    """Base of answers."""

    model_config = ConfigDict(defer_build=True)


class ErrorAnswer(Answer):
    error: str
    message: str


@dataclass(slots=True)
class Call:
    """One request to a declared route: the parsed query and body, and who is asking."""

    request: web.Request
    gateway: Services
    query: Any = None
    body: Any = None

    def param(self, name: str) -> str:
        return self.request.match_info[name]

    def who(self) -> Principal:
        return principal(self.request)

    def user_id(self, *, must_exist: bool = True) -> str:
        """The ``{uid}`` of the URL (``me``: the signed-in person) if the caller may see that user: the
        person themselves or the operator; 404 for anyone else and for a user that does not exist
        (``must_exist=False``: the route handles a user the users table no longer knows itself)."""
        uid = resolve_user_id(self.request, self.param("uid"))
        if must_exist and self.gateway.state.users.get(uid) is None:
            raise ApiError(404, "no such user")
        return uid


Handler = Callable[[Call], Awaitable[BaseModel | web.StreamResponse]]
PATH_PARAM = re.compile(r"\{(\w+)(?::[^}]*)?\}")


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str  # aiohttp's form: "/api/users/{uid}/memory/files/{path:.+}"
    summary: str
    answer: type[BaseModel]
    handler: Handler | None = None  # None: served by another module, declared here for the document
    query: type[Query] | None = None
    body: type[Body] | None = None
    operator: bool = False  # only the operator may call it (x-operator in the document)
    public: bool = False  # no sign-in needed
    status: int = 200
    errors: tuple[int, ...] = (400, 401, 404)
    description: str = ""
    params: dict[str, dict[str, Any]] = field(default_factory=dict)  # path parameter schemas (default: string)
    tag: str = ""
    raw_body: bool = False  # the body is a file of any type, read by the handler (POST /api/uploads)
    raw_answer: bool = False  # the answer is a file of any type, the handler's own response (GET .../media/...)
    user_must_exist: bool = True  # False: {uid} may name a user only files remember (DELETE /api/users/{uid})

    @property
    def openapi_path(self) -> str:
        return PATH_PARAM.sub(lambda m: "{" + m.group(1) + "}", self.path)

    @property
    def path_params(self) -> list[str]:
        return PATH_PARAM.findall(self.path)


def _validation_message(exc: ValidationError, where: str) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or where
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return f"invalid {where}: " + "; ".join(parts)


def endpoint(route: Route, gateway: Services) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The aiohttp handler of ``route``: validate, call, serialise; every failure as a JSON error."""
    handler = route.handler
    assert handler is not None

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            call = Call(request=request, gateway=gateway)
            if route.operator:
                require_operator_principal(request)
            elif not route.public:
                principal(request)
            if "uid" in request.match_info:
                # Whose data comes before what was asked: another person's URL is 404 whatever the
                # query or body, so a 400 can never hint that the user exists.
                call.user_id(must_exist=route.user_must_exist)
            for name, schema in route.params.items():
                if schema.get("type") == "integer" and not re.fullmatch(r"-?\d{1,18}", request.match_info[name]):
                    raise ApiError(400, f"{name} must be an integer")
            if route.query is not None:
                raw = {key: request.query.getone(key) for key in request.query}
                try:
                    call.query = route.query.model_validate(raw)
                except ValidationError as exc:
                    raise ApiError(400, _validation_message(exc, "query")) from None
            if route.body is not None:
                try:
                    data = await json_object(request, empty_ok=True)
                except web.HTTPRequestEntityTooLarge:
                    raise ApiError(413, "request body too large") from None
                try:
                    call.body = route.body.model_validate(data)
                except ValidationError as exc:
                    raise ApiError(400, _validation_message(exc, "body")) from None
            result = await handler(call)
            if isinstance(result, web.StreamResponse):
                if not route.raw_answer:
                    raise TypeError(f"{route.method} {route.path} answered a raw response; declare raw_answer")
                return result
        except ApiError as exc:
            return error_response(exc.status, exc.message, exc.code)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            headers = {k: v for k, v in exc.headers.items() if k.lower() not in ("content-type", "content-length")}
            return error_response(exc.status, exc.text or exc.reason, headers=headers)
        return web.Response(text=result.model_dump_json(), status=route.status, content_type="application/json",
                            headers={"Cache-Control": "no-store"})

    return handle


def install_routes(app: web.Application, gateway: Services, table: list[Route]) -> None:
    for route in table:
        if route.handler is not None:
            app.router.add_route(route.method, route.path, endpoint(route, gateway))


API_PREFIX = "/api/"


@web.middleware
async def json_errors(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:  # fmt: skip
    """Under ``/api/``, every error is JSON, including the ones no API handler wrote: the HTTP guard's
    refusals (Host, Origin, content type), the CSRF check, aiohttp's 404 and 405, a body over the size
    limit, and an unexpected exception (logged, answered 500 without details)."""
    if not request.path.startswith(API_PREFIX):
        return await handler(request)
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() not in ("content-type", "content-length")}
        return error_response(exc.status, exc.text or exc.reason, headers=headers)
    except Exception:
        log.exception("API request %s %s failed", request.method, request.path[:200])
        return error_response(500, "internal error; the daemon's log has the details")
    if response.status >= 400 and not response.prepared and response.content_type != "application/json":
        text = response.text if isinstance(response, web.Response) and response.text is not None else ""
        headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-type", "content-length")}
        return error_response(response.status, text or response.reason or "error", headers=headers)
    return response
