"""Issue 27, low item: ``X-ProxyUser-Ip`` (Google's proxies) and ``X-Envoy-External-Address`` (Envoy,
Istio) name the real client as ``X-Forwarded-For`` does, but were not among the refused proxy headers:
through such a proxy a token-less daemon's ``/ws`` (a trusted channel that skips pairing) and operator
API were open. Without ``server.token`` they are refused now like the others (403), ``/ws`` included."""

from __future__ import annotations

import aiohttp
import pytest

from tests.conftest import GatewayFactory
from tests.security.guarded_daemon import idle_bus, operator_token

HEADERS = [{"X-ProxyUser-Ip": "203.0.113.9"}, {"X-Envoy-External-Address": "203.0.113.9"},
           {"x-envoy-attempt-count": "1"}, {"Fly-Client-IP": "203.0.113.9"}, {"X-Azure-ClientIP": "203.0.113.9"},
           {"CF-Connecting-IPv6": "2001:db8::9"}, {"X-AppEngine-User-IP": "203.0.113.9"}]  # fmt: skip


@pytest.mark.parametrize("extra", HEADERS, ids=[next(iter(h)) for h in HEADERS])
async def test_more_proxy_headers_are_refused_without_a_token(make_gateway: GatewayFactory,
                                                              extra: dict[str, str]) -> None:  # fmt: skip
    gw = await make_gateway(**idle_bus())
    token = operator_token(gw)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{gw.port}/api/memory/stats",
                            headers={"Authorization": f"Bearer {token}", **extra}) as resp:  # fmt: skip
            assert resp.status == 403 and "docs/security.md#proxies" in await resp.text()
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"http://127.0.0.1:{gw.port}/ws", headers=extra)
        assert refused.value.status == 403
        async with http.get(f"http://127.0.0.1:{gw.port}/api/memory/stats",
                            headers={"Authorization": f"Bearer {token}"}) as resp:  # fmt: skip
            assert resp.status == 200, "guard: without the header the same request is served"
