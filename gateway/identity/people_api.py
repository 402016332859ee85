"""The daemon's operator route for erasing a person: ``POST /users/delete {"user": ID, "missing_ok"?: bool}``.

``kith users delete`` posts here while a daemon runs, so the erase happens in the process that holds
the memory index, the job bus and the caches (gateway/identity/erase.py). Operator auth as every
operator endpoint; the answer is the erase report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from gateway.http.auth import require_operator
from gateway.http.guard import json_object
from gateway.identity.erase import EraseError, erase_person
from gateway.memory.files.scopes import ScopeError

if TYPE_CHECKING:
    from gateway.app import Gateway


def people_routes(gateway: Gateway) -> list[web.RouteDef]:
    async def delete(request: web.Request) -> web.Response:
        require_operator(request)
        body = await json_object(request)
        user = body.get("user")
        if not isinstance(user, str) or not user:
            raise web.HTTPBadRequest(text='want {"user": "<user id>"}')
        try:
            report = await erase_person(gateway, user, missing_ok=body.get("missing_ok") is True)
        except EraseError as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        except ScopeError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        return web.json_response(report.as_dict())

    return [web.post("/users/delete", delete)]
