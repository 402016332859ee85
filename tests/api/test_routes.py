"""One HTTP API (issue 29, item 1): every route the daemon serves is a declared route in the OpenAPI
document, or one of the few routes docs/api.md lists outside the API with its reason; plugins add
routes through ``gateway_register_routes`` and get the same checks as the host's own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from gateway.app import Gateway
from gateway.config import ConfigError
from gateway.hookspecs import hookimpl
from gateway.http.api.spec import Answer, Body, Call, Route
from gateway.testing import ConfigFactory
from tests.api.rig import Client, operator, person, signed_in
from tests.signin.rig import browser

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"get", "put", "post", "patch", "delete"}


class Note(Body):
    text: str = Field(min_length=1, max_length=100)


class Noted(Answer):
    user_id: str
    text: str


async def _note(call: Call) -> Noted:
    body: Note = call.body
    return Noted(user_id=call.user_id(), text=body.text)


async def _count(call: Call) -> Noted:
    return Noted(user_id="", text=str(len(call.gateway.state.users.all())))


class NotesPlugin:
    """A third-party plugin's routes: one a person calls on their own memory, one for the operator."""

    __name__ = "notes_plugin"

    @hookimpl
    def gateway_register_routes(self, register: Any) -> None:
        register(Route("POST", "/api/users/{uid}/notes", "keep a note", Noted, _note, body=Note, tag="notes"))
        register(Route("GET", "/api/notes/count", "how many people (operator)", Noted, _count, operator=True,
                       tag="notes", errors=(401, 403)))  # fmt: skip


class Careless:
    """Every kind of route registration mistake at once."""

    __name__ = "careless"

    @hookimpl
    def gateway_register_routes(self, register: Any) -> None:
        register(Route("GET", "/api/me", "a second me", Noted, _count))  # the host serves GET /api/me
        register(Route("GET", "/notes", "outside /api", Noted, _count))
        register(Route("GET", "/api/nothing", "no handler", Noted))
        register(Route("POST", "/api/users/{uid}/notes", "a body that is not a Body", Noted, _note,
                       body=Noted))  # type: ignore[arg-type]  # fmt: skip
        register("GET /api/x")


def served(gw: Gateway) -> set[tuple[str, str]]:
    """(method, OpenAPI path) of every route the started daemon's router holds."""
    out = set()
    for route in gw.http_app.router.routes():
        resource = route.resource
        if resource is None or route.method in ("HEAD", "OPTIONS"):
            continue  # aiohttp answers HEAD of every GET itself
        out.add((route.method.lower(), re.sub(r"\{(\w+)(?::[^}]*)?\}", r"{\1}", resource.canonical)))
    return out


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m, path) for path, ops in doc["paths"].items() for m in ops if m in METHODS}


def outside_the_api() -> set[tuple[str, str]]:
    """The routes docs/api.md lists under "Routes outside the API": the first column of its table."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Routes outside the API", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`", section, flags=re.MULTILINE)
    return {(m.lower(), p) for m, p in rows}


@pytest.fixture
async def full(kith_config: ConfigFactory) -> Any:
    """A started daemon with every channel that serves HTTP (webhooks included) and a plugin's routes."""
    config = kith_config(server={"port": 0, "token": "operator-secret-123456"}, channels={
        "telegram": {"enabled": True, "token": "123:abc", "mode": "webhook", "webhook_secret": "s" * 24,
                     "webhook_url": "https://kith.example/telegram/webhook"},
        "nextcloud": {"enabled": True, "base_url": "https://cloud.example", "bot_secret": "n" * 40},
    })  # fmt: skip
    gw = Gateway(config, plugins=(NotesPlugin(),), entry_points=False, supervise=False)
    await gw.__aenter__()
    try:
        yield gw
    finally:
        await gw.close()


async def test_every_route_the_daemon_serves_is_in_the_document_or_listed_outside_it(full: Gateway) -> None:
    nobody = Client(full, browser())
    status, doc = await nobody.get("/api/openapi.json")
    await nobody.close()
    assert status == 200
    routes, declared, outside = served(full), documented(doc), outside_the_api()
    assert ("post", "/telegram/webhook") in routes and ("post", "/nextcloud/webhook") in routes
    unlisted = routes - declared - outside
    assert not unlisted, f"served, but neither documented nor listed outside the API: {unlisted}"
    assert declared <= routes, f"documented but not served: {declared - routes}"
    assert not outside & declared, f"listed outside the API but documented: {outside & declared}"
    assert outside <= routes, f"docs/api.md lists routes the daemon does not serve: {outside - routes}"
    # The old hand-written operator routes are gone, and nothing outside the API is under /api.
    assert not {p for _, p in routes} & {"/context", "/memory/search", "/memory/stats", "/memory/reindex",
                                         "/users/delete", "/distill/{tier}", "/distill/status"}  # fmt: skip
    assert all(p.startswith("/api/") or p == "/healthz" for _, p in declared)
    assert not any(p.startswith("/api/") for _, p in outside)


async def test_a_plugins_routes_are_served_documented_and_checked_like_the_hosts(full: Gateway) -> None:
    alice, bob = await person(full, "alice"), await person(full, "bob")
    op = operator(full)
    _, doc = await op.get("/api/openapi.json")
    assert doc["paths"]["/api/users/{uid}/notes"]["post"]["requestBody"]
    assert doc["paths"]["/api/notes/count"]["get"]["x-operator"] is True
    assert full.registrations.routes.plugin_of("POST /api/users/{}/notes") == "notes_plugin"
    assert full.registrations.routes.plugin_of("GET /api/me") == "gateway.http.api.table"

    client = await signed_in(full, alice)
    assert await client.call("POST", "/api/users/me/notes", {"text": "tea"}) == (200, {"user_id": alice,
                                                                                      "text": "tea"})  # fmt: skip
    status, err = await client.call("POST", f"/api/users/{bob}/notes", {"text": "tea"})
    assert (status, err["error"]) == (404, "not_found")  # another person's URL: as if bob did not exist
    status, err = await client.call("POST", "/api/users/me/notes", {"text": "tea", "color": "red"})
    assert (status, err["error"]) == (400, "invalid") and "color" in err["message"]
    status, err = await client.call("POST", "/api/users/me/notes", raw=b"{not json")
    assert (status, err["error"]) == (400, "invalid") and "JSON" in err["message"]
    status, err = await client.get("/api/notes/count")
    assert (status, err["error"]) == (403, "forbidden")
    assert await op.get("/api/notes/count") == (200, {"user_id": "", "text": "2"})
    nobody = Client(full, browser())
    status, err = await nobody.get("/api/notes/count")
    assert (status, err["error"]) == (401, "unauthorized")
    await nobody.close()
    await client.close()
    await op.close()


async def test_every_route_registration_problem_refuses_startup_in_one_error(kith_config: ConfigFactory) -> None:
    config = kith_config()
    with pytest.raises(ConfigError) as info:
        async with Gateway(config, plugins=(Careless(),), entry_points=False):
            pass
    text = "\n".join(info.value.problems)
    assert len(info.value.problems) == 5, text
    assert "route 'GET /api/me' registered twice (gateway.http.api.table and careless)" in text
    assert "plugin careless: route GET /notes: the path must start with /api/" in text
    assert "plugin careless: route GET /api/nothing: has no handler" in text
    assert "plugin careless: route POST /api/users/{uid}/notes: body must subclass" in text
    assert "plugin careless: register() takes a gateway.http.api.spec.Route, not str" in text
    assert not (Path(config.data_dir) / "state.sqlite").exists()  # refused before anything was opened
