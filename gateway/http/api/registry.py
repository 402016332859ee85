"""The daemon's HTTP routes, as plugins declare them: ``gateway_register_routes(register)``.

A plugin calls ``register(Route(...))`` (``gateway/http/api/spec.py``) for each route it serves, exactly
as the host's own ``/api`` table is registered (``gateway/http/api/table.py``, a built-in plugin). The
gateway mounts what was registered on its one aiohttp application and lists it in the served OpenAPI
document, so a plugin's route gets the same operator check, validation, JSON errors and documentation
as every other: no plugin touches the router.

A route is a problem (start-up is refused with every problem at once, ``gateway/registry.py``) when it
is not a ``Route``, has no handler, lies outside ``/api/``, uses a method the API does not, names
models of the wrong base, or takes a method and path another plugin (or the host) already serves.
"""

from __future__ import annotations

from pydantic import BaseModel

from gateway.http.api.spec import PATH_PARAM, Body, Query, Route
from gateway.registry import Registry
from gateway.types import StashKey

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
PREFIX = "/api/"


def route_key(route: Route) -> str:
    """``"GET /api/users/{}/recall"``: two routes with the same key would shadow one another in the
    router, whatever their path parameters are named."""
    return f"{route.method} {PATH_PARAM.sub('{}', route.path)}"


def _subclass(value: object, base: type) -> bool:
    return isinstance(value, type) and issubclass(value, base)


class RouteRegistry(Registry[Route]):
    """The ``register`` handed to ``gateway_register_routes``: ``register(route)``."""

    kind = "route"

    def __call__(self, route: Route) -> None:
        if not isinstance(route, Route):
            self.problem(f"register() takes a gateway.http.api.spec.Route, not {type(route).__name__}")
            return
        where = f"route {route.method} {route.path}"
        problems = []
        if route.method not in METHODS:
            problems.append(f"method must be one of {', '.join(sorted(METHODS))}")
        if not route.path.startswith(PREFIX) or "//" in route.path:
            problems.append(f"the path must start with {PREFIX} (the API's guard, errors and document apply there)")
        if not callable(route.handler):
            problems.append("has no handler (a route is declared by what serves it)")
        if not route.summary.strip():
            problems.append("needs a summary (the document lists it)")
        if not _subclass(route.answer, BaseModel):
            problems.append("answer must be a pydantic model")
        if route.query is not None and not _subclass(route.query, Query):
            problems.append("query must subclass gateway.http.api.spec.Query")
        if route.body is not None and not _subclass(route.body, Body):
            problems.append("body must subclass gateway.http.api.spec.Body")
        if problems:
            self.problem(f"{where}: {'; '.join(problems)}")
            return
        self.add(route_key(route), route)


#: What plugins registered, in the gateway's stash (set in ``Gateway.start``): modules typed against
#: ``gateway.services.Services`` read it here.
ROUTES = StashKey[RouteRegistry]()
