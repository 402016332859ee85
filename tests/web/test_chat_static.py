"""The page's files over HTTP (gateway/web/serve.py): allowlist, content types, cache headers, CSP."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest

from gateway.web import serve

pytestmark = pytest.mark.skipif(not (serve.NODE_MODULES / "markdown-it").is_dir(),
                                reason="scripts/setup has not run npm ci (gateway/web/node_modules)")


async def _get(gw: Any, path: str, **headers: str) -> tuple[int, Any, bytes]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{gw.port}{path}",
                                                          headers=headers) as resp:
        return resp.status, resp.headers.copy(), await resp.read()


async def test_page_has_a_self_only_content_security_policy(make_gateway: Any) -> None:
    gw = await make_gateway()
    status, headers, body = await _get(gw, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "default-src 'self'" in csp and "unsafe-inline" not in csp
    assert b"http://" not in body and b"https://" not in body  # nothing loaded from elsewhere


async def test_vendored_libraries_are_served_from_the_lock(make_gateway: Any) -> None:
    gw = await make_gateway()
    for name, target in serve.VENDOR.items():
        status, headers, body = await _get(gw, f"/static/vendor/{name}")
        assert status == 200, name
        assert headers["Content-Type"].startswith("text/javascript")
        assert headers["Cache-Control"] == serve.VENDOR_CACHE
        assert body == (serve.NODE_MODULES / target).read_bytes()
        assert b"export" in body  # an ES module the page imports without a bundler
        status, _, body = await _get(gw, f"/static/vendor/{name}", **{"If-None-Match": headers["ETag"]})
        assert status == 304 and body == b""


async def test_own_files_revalidate_and_carry_their_types(make_gateway: Any) -> None:
    gw = await make_gateway()
    status, headers, _ = await _get(gw, "/static/chat.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css")
    assert headers["Cache-Control"] == "no-cache" and headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("path", [
    "/static/vendor/markdown-it/package.json", "/static/vendor/..%2Fpackage.json", "/static/vendor/nope.js",
    "/static/../serve.py", "/static/%2e%2e/serve.py", "/static/..%2Fserve.py", "/static/missing.js",
    "/static/vendor/%2e%2e%2f%2e%2e%2fserve.py", "/static/.hidden.js",
])
async def test_nothing_outside_the_allowlist(make_gateway: Any, path: str) -> None:
    gw = await make_gateway()
    status, _, body = await _get(gw, path)
    assert status == 404, (path, body[:80])


async def test_every_file_the_page_names_is_served_and_every_chat_module_is_preloaded(make_gateway: Any) -> None:
    gw = await make_gateway()
    _, _, body = await _get(gw, "/")
    html = body.decode()
    refs = re.findall(r'(?:href|src)="(/[^"]*)"', html)
    for ref in refs:
        status, _, _ = await _get(gw, ref)
        assert status == 200, ref
    # Modules are preloaded so the browser fetches them in one round, not import by import.
    modules = {f"/static/chat/{p.name}" for p in (serve.STATIC_DIR / "chat").glob("*.js")}
    assert modules <= set(refs), modules - set(refs)
    for module in modules:  # and every import inside them names a file that exists
        source = (serve.STATIC_DIR / module.removeprefix("/static/")).read_text()
        for target in re.findall(r'from "(\./[^"]+|/static/[^"]+)"|import\("(/static/[^"]+)"\)', source):
            path = next(t for t in target if t)
            url = path if path.startswith("/") else f"/static/chat/{path.removeprefix('./')}"
            status, _, _ = await _get(gw, url)
            assert status == 200, (module, url)
