"""The served OpenAPI document: valid OpenAPI 3.1, listing every /api route the daemon serves (so a
route cannot be added undocumented), operator-only routes marked and refused to a person, and errors
as JSON {error, message} even where no API handler answered."""

from __future__ import annotations

import re
from typing import Any

import schemathesis

from gateway.app import Gateway
from tests.api.rig import Client, operator, person, signed_in
from tests.signin.rig import browser

METHODS = {"get", "put", "post", "patch", "delete"}


def served(gw: Gateway) -> set[tuple[str, str]]:
    """(method, OpenAPI path) of every route under /api the daemon's router holds."""
    out = set()
    for route in gw.http_app.router.routes():
        resource = route.resource
        if resource is None or route.method in ("HEAD", "OPTIONS") or not resource.canonical.startswith("/api/"):
            continue
        path = re.sub(r"\{(\w+)(?::[^}]*)?\}", r"{\1}", resource.canonical)
        out.add((route.method.lower(), path))
    return out


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m, path) for path, ops in doc["paths"].items() for m in ops if m in METHODS}


async def test_document_is_valid_openapi_and_lists_every_api_route(gw: Gateway) -> None:
    nobody = Client(gw, browser())
    status, doc = await nobody.get("/api/openapi.json")  # public: third-party clients discover the API
    assert status == 200 and doc["openapi"].startswith("3.1")
    schemathesis.openapi.from_dict(doc).validate()
    routes = served(gw)
    assert len(routes) >= 20
    # Every route under /api is documented (and /healthz beside them): tests/api/test_routes.py walks
    # every other route the daemon serves.
    api = {(m, p) for m, p in documented(doc) if p.startswith("/api/")}
    assert routes == api, (routes ^ api)
    assert documented(doc) - api == {("get", "/healthz")}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert op["summary"] and op["operationId"], (method, path)
            assert all(str(s).isdigit() for s in op["responses"]), (method, path)
            for param in re.findall(r"\{(\w+)\}", path):
                assert any(p["name"] == param and p["in"] == "path" for p in op["parameters"]), (path, param)
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    await nobody.close()


async def test_operator_routes_are_marked_and_refused_to_a_person(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    op = operator(gw)
    _, doc = await op.get("/api/openapi.json")
    marked = {(m, p) for p, ops in doc["paths"].items() for m, o in ops.items() if o.get("x-operator")}
    assert {("get", "/api/users"), ("get", "/api/pairing"), ("post", "/api/pairing/{code}/approve"),
            ("post", "/api/pairing/{code}/deny"), ("get", "/api/users/{uid}/quarantine")} <= marked
    client = await signed_in(gw, alice)
    for method, path in sorted(marked):
        url = re.sub(r"\{(\w+)\}", lambda m: "me" if m.group(1) == "uid" else "x1", path)
        status, err = await client.call(method.upper(), url, {} if method != "get" else None)
        assert status == 403 and err["error"] == "forbidden", (method, path, status, err)
    await client.close()
    await op.close()


async def test_errors_are_json_wherever_they_come_from(gw: Gateway) -> None:
    op = operator(gw)
    alice = await person(gw, "alice")  # the operator names the user (the token has no "me")
    cases: list[tuple[str, str, dict[str, str], bytes | None, int]] = [
        ("GET", "/api/no-such-route", {}, None, 404),
        ("DELETE", "/api/me", {}, None, 405),
        ("PATCH", "/api/users/me/settings", {"Content-Type": "text/plain"}, b"x", 415),  # the guard's refusal
        ("PATCH", "/api/users/me/settings", {"Origin": "http://evil.example"}, b"{}", 403),  # the guard's Origin
        ("PATCH", f"/api/users/{alice}/settings", {}, b"\xff\xfe", 400),
        ("PUT", f"/api/users/{alice}/memory/files/USER.md", {}, b"{" * 5000, 400),
    ]
    for method, path, headers, body, expected in cases:
        status, err = await op.call(method, path, raw=body, headers=headers) if body is not None else \
            await op.call(method, path, headers=headers)
        assert status == expected, (method, path, status, err)
        assert isinstance(err, dict) and set(err) == {"error", "message"}, err
    await op.close()
