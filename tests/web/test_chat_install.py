"""The chat is installable (docs/web.md#installing-the-app): a manifest and an app icon, and a service
worker at the site's root that keeps the app shell (every file the page loads) and never the API."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import pytest

from gateway.web import serve
from tests.web.chat_support import browser, open_chat, shot, wait_until  # noqa: F401  (browser is a fixture)

SW = (serve.STATIC_DIR / "sw.js").read_text()
SHELL = re.findall(r'^  "(/[^"]*)",$', SW, flags=re.M)


async def _get(gw: Any, path: str) -> tuple[int, Any, bytes]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{gw.port}{path}") as resp:
        return resp.status, resp.headers.copy(), await resp.read()


async def test_manifest_icon_and_service_worker_are_served(make_gateway: Any) -> None:
    gw = await make_gateway()
    status, headers, body = await _get(gw, "/manifest.webmanifest")
    assert status == 200 and headers["Content-Type"] == "application/manifest+json"
    manifest = json.loads(body)
    assert manifest["start_url"] == "/" and manifest["display"] == "standalone"
    for icon in manifest["icons"]:
        status, headers, body = await _get(gw, icon["src"])
        assert status == 200 and headers["Content-Type"] == icon["type"] == "image/svg+xml"
        assert body.startswith(b"<svg") and b"<script" not in body
    status, headers, body = await _get(gw, "/sw.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert headers["Cache-Control"] == "no-cache", "a new worker is picked up at once"
    assert b"addEventListener(\"fetch\"" in body
    status, _, page = await _get(gw, "/")
    assert b'rel="manifest" href="/manifest.webmanifest"' in page and b'rel="icon"' in page


@pytest.mark.skipif(not (serve.NODE_MODULES / "markdown-it").is_dir(), reason="scripts/setup has not run npm ci")
async def test_the_shell_list_is_every_file_the_page_loads(make_gateway: Any) -> None:
    gw = await make_gateway()
    page = (serve.STATIC_DIR / "index.html").read_text()
    loaded = set(re.findall(r'(?:href|src)="(/[^"]+)"', page))
    assert loaded - set(SHELL) <= {"/console"}, "precache what index.html loads (sw.js SHELL)"
    modules = {f"/static/chat/{p.name}" for p in (serve.STATIC_DIR / "chat").glob("*.js")}
    assert modules <= set(SHELL), modules - set(SHELL)
    assert not [p for p in SHELL if not (p == "/" or p.startswith("/static/") or p == "/manifest.webmanifest")]
    for path in SHELL:
        status, _, _ = await _get(gw, path)
        assert status == 200, path


@pytest.mark.browser
@pytest.mark.parametrize("size", ["desktop", "phone"])  # 1280 and 390 px (tests/web/chat_support.py)
async def test_the_worker_caches_the_shell_and_not_the_api(browser: Any, make_gateway: Any, size: str) -> None:  # noqa: F811
    gw = await make_gateway()
    chat = await open_chat(browser, gw, size, client_id=f"web-install-{size}")
    page = chat.page
    assert await page.evaluate("navigator.serviceWorker.ready.then((r) => r.active.scriptURL)") == \
        f"http://127.0.0.1:{gw.port}/sw.js"
    # Chromium's own verdict: nothing in the page stands in the way of installing it (manifest, icon,
    # worker); a test's browser context is incognito-like, which Chromium always lists.
    cdp = await page.context.new_cdp_session(page)
    verdict = await cdp.send("Page.getInstallabilityErrors")
    assert [e["errorId"] for e in verdict["installabilityErrors"]] in ([], ["in-incognito"]), verdict
    # Controlled from the next load on; the API and the socket run again under it.
    await page.reload()
    await page.wait_for_selector("#conn.on")
    await wait_until(page, "!!navigator.serviceWorker.controller")
    await page.evaluate("fetch('/api/me', {credentials: 'same-origin'}).then((r) => r.status)")
    cached = await page.evaluate("""async () => {
        const keys = [];
        for (const name of await caches.keys()) {
          for (const r of await (await caches.open(name)).keys()) keys.push(new URL(r.url).pathname);
        }
        return keys; }""")
    assert set(SHELL) <= set(cached), set(SHELL) - set(cached)
    assert not [k for k in cached if k.startswith(("/api/", "/ws", "/signin"))], cached
    # The daemon out of reach: the page still opens from the cache, and says it is reconnecting.
    await page.context.set_offline(True)
    await page.reload()
    await page.wait_for_selector("#conn.off")
    assert await page.is_visible("#input") and await page.is_visible("header h1 img")
    chat.errors.clear()  # the socket's failed connects while offline
    await page.context.set_offline(False)
    await page.wait_for_selector("#conn.on")
    await page.goto(f"http://127.0.0.1:{gw.port}/static/icon.svg")  # the app icon, to look at
    await page.set_viewport_size({"width": 512, "height": 512})
    await shot(page, f"app-icon-{size}", "512")
