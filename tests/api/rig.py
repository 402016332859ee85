"""Shared by the API tests: a real gateway (port 0), people created through kith's own message path,
and clients as a third party would hold them: a person signed in through a real one-time link (cookie
+ CSRF token), and the operator with the Bearer token."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aiohttp

from gateway.app import Gateway
from gateway.http.auth import OPERATOR_TOKEN
from tests.signin.rig import browser, person, sign_in, url

__all__ = ["Client", "operator", "person", "signed_in"]


@dataclass
class Client:
    gw: Gateway
    http: aiohttp.ClientSession
    headers: dict[str, str] = field(default_factory=dict)

    async def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:  # fmt: skip
        send = {**self.headers, **(headers or {})}
        kwargs: dict[str, Any] = {}
        if raw is not None:
            kwargs["data"] = raw
            send.setdefault("Content-Type", "application/json")
        elif body is not None or method in ("POST", "PUT", "PATCH", "DELETE"):
            kwargs["json"] = {} if body is None else body
        async with self.http.request(method, url(self.gw, path), headers=send, **kwargs) as resp:
            data = await resp.json(content_type=None) if resp.content_length != 0 else None
            return resp.status, data

    async def get(self, path: str) -> tuple[int, Any]:
        return await self.call("GET", path)

    async def close(self) -> None:
        await self.http.close()


async def signed_in(gw: Gateway, user_id: str, *, as_operator: bool = False) -> Client:
    http = browser()
    csrf = await sign_in(gw, http, user_id, operator=as_operator)
    return Client(gw, http, {"X-CSRF-Token": csrf})


def operator(gw: Gateway) -> Client:
    return Client(gw, aiohttp.ClientSession(), {"Authorization": f"Bearer {gw.http_app[OPERATOR_TOKEN]}"})
