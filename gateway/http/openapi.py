"""The served OpenAPI 3.1 document of the person-facing API, generated from the route table
(``gateway/http/api/``): every route's parameters, body and answer come from the same pydantic models
that validate and serialise it, so the document cannot drift from what the daemon does. Routes only
the operator may call carry ``x-operator: true``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from gateway.http.api.spec import ERROR_CODES, ErrorAnswer, Route

VERSION = "1"
REF = "#/components/schemas/{model}"


STRING = {"type": "string", "minLength": 1}
# Shared path parameters: {uid} is a user id, or "me" for the signed-in person.
PATH_PARAMS = {"uid": {"type": "string", "minLength": 1, "maxLength": 200, "examples": ["me"],
                       "description": "a user id, or `me` for the signed-in person"}}  # fmt: skip


def _path_param(r: Route, name: str) -> dict[str, Any]:
    return r.params.get(name) or PATH_PARAMS.get(name) or STRING


def operation_id(r: Route) -> str:
    words = r.openapi_path.strip("/").replace("{", "").replace("}", "").replace(".", "_").split("/")
    return "_".join([r.method.lower(), *words])


def _query_params(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", ()))
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if description:
            param["description"] = description
        params.append(param)
    return params


def document(routes: list[Route]) -> dict[str, Any]:
    models: list[tuple[type[BaseModel], Any]] = [(ErrorAnswer, "serialization")]
    for r in routes:
        models.append((r.answer, "serialization"))
        if r.body is not None:
            models.append((r.body, "validation"))
    refs, top = models_json_schema(list(dict.fromkeys(models)), ref_template=REF)
    error_ref = {"content": {"application/json": {"schema": refs[(ErrorAnswer, "serialization")]}}}
    paths: dict[str, dict[str, Any]] = {}
    for r in routes:
        op: dict[str, Any] = {
            "operationId": operation_id(r),
            "summary": r.summary,
            "tags": [r.tag] if r.tag else [],
            "parameters": [{"name": p, "in": "path", "required": True, "schema": _path_param(r, p)}
                           for p in r.path_params],
            "responses": {
                str(r.status): {"description": "success",
                                "content": {"application/json": {"schema": refs[(r.answer, "serialization")]}}},
            },
        }  # fmt: skip
        if r.raw_answer:
            # The file itself, with its own type (a person's media); the document names the generic one.
            op["responses"][str(r.status)]["content"] = {"application/octet-stream": {
                "schema": {"type": "string", "format": "binary"}}}
        if r.description:
            op["description"] = r.description
        if r.query is not None:
            op["parameters"] += _query_params(r.query)
        if r.body is not None:
            op["requestBody"] = {"required": True,
                                 "content": {"application/json": {"schema": refs[(r.body, "validation")]}}}
        elif r.raw_body:
            # Any type is taken (the file's own); the document names the generic one.
            binary = {"schema": {"type": "string", "format": "binary"}}
            op["requestBody"] = {"required": True, "content": {"application/octet-stream": binary}}
        for status in sorted({*r.errors, *((400,) if r.body or r.query else ())}):
            op["responses"][str(status)] = {"description": ERROR_CODES.get(status, "error"), **error_ref}
        if r.public:
            op["security"] = []
        if r.operator:
            op["x-operator"] = True
        paths.setdefault(r.openapi_path, {})[r.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kith person API",
            "version": VERSION,
            "description": "A person's settings, sessions and memory; the operator's users and pairing queue. "
                           "Errors are {error, message}. Sign in with the kith_session cookie (send "
                           "X-CSRF-Token from GET /api/me with every change) or the operator token "
                           "(Authorization: Bearer). {uid} may be `me`. See docs/api.md.",
        },
        "servers": [{"url": "/"}],
        "security": [{"operatorToken": []}, {"sessionCookie": []}],
        "paths": paths,
        "components": {
            "schemas": top.get("$defs", {}),
            "securitySchemes": {
                "operatorToken": {"type": "http", "scheme": "bearer",
                                  "description": "server.token, or <data_dir>/operator.token"},
                "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "kith_session",
                                  "description": "from a sign-in link; changes also need X-CSRF-Token"},
            },
        },
    }
