"""Issue 12 acceptance: a real browser page on a foreign origin, and on a rebound DNS name, can read
nothing and change nothing through the daemon's HTTP API or its WebSocket.

Chromium resolves ``evil.example`` and ``rebound.example`` to 127.0.0.1 (``--host-resolver-rules``).
The attacker's page comes from the attacker's own server (aiohttp, a free port) and is opened twice:

* at ``http://evil.example:<attacker port>/``: a foreign origin that aims fetch(), no-cors POSTs,
  HTML form posts (text/plain, urlencoded, multipart) and WebSockets at ``127.0.0.1``, ``localhost``
  and ``evil.example`` on the daemon's port;
* at ``http://rebound.example:<daemon port>/``: DNS rebinding. The document is the attacker's (the
  navigation is answered from the attacker's server, as before the DNS answer changed); everything
  it fetches afterwards resolves to 127.0.0.1 and reaches the daemon as a *same-origin* request.

The page reports what it could read; the daemon's side is checked too: no operator job queued, no
distillation run, no user or turn created, no WebSocket connected, and the refusals were logged (so
the requests did arrive). A last page on the daemon's own origin proves the browser reaches it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from gateway.app import Gateway
from tests.browser import ARGS, shared_browser
from tests.conftest import GatewayFactory
from tests.fakes.serve import serve
from tests.security.guarded_daemon import footprint, idle_bus, web_user

pytestmark = pytest.mark.browser

SECRET = "pier 17"  # in the victim's history and memory: must never reach the page
RESOLVER = "--host-resolver-rules=MAP evil.example 127.0.0.1, MAP rebound.example 127.0.0.1"
# Recent Chromium refuses requests from a public page to loopback (Local/Private Network Access);
# Firefox, Safari and older browsers do not, so the daemon must hold without that help: switch it off.
NO_LOCAL_NETWORK_CHECKS = ("--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests,"
                           "PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults")

ATTACK_PAGE = """<!doctype html>
<meta charset="utf-8"><title>cute cats</title>
<body>
<script>
const P = __PARAMS__;
const results = [];
window.done = false;

async function tryFetch(label, url, init) {
  try {
    const r = await fetch(url, init);
    let body = "";
    try { body = await r.text(); } catch (e) { body = "<unreadable>"; }
    results.push({kind: "fetch", label, url, type: r.type, status: r.status, body: body.slice(0, 4000)});
  } catch (e) {
    results.push({kind: "fetch", label, url, error: String(e)});
  }
}

function tryWs(url) {
  return new Promise(resolve => {
    const got = [];
    let opened = false, ws;
    const finish = () => { results.push({kind: "ws", url, opened, messages: got}); resolve(); };
    try { ws = new WebSocket(url); } catch (e) { results.push({kind: "ws", url, error: String(e)}); return resolve(); }
    ws.onopen = () => {
      opened = true;
      ws.send(JSON.stringify({type: "hello", client_id: P.victimClient, name: "victim"}));
      ws.send(JSON.stringify({type: "message", id: "steal", text: "what do you remember about my boat?"}));
    };
    ws.onmessage = ev => got.push(String(ev.data));
    ws.onclose = finish;
    setTimeout(() => { try { ws.close(); } catch (e) {} }, 4000);
  });
}

function formPost(action, enctype, fields) {
  // One iframe per form: a second submit into the same frame could cancel the first request.
  return new Promise(resolve => {
    const frame = document.createElement("iframe");
    frame.name = "f" + Math.random().toString(36).slice(2);
    frame.style.display = "none";
    document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST"; form.action = action; form.enctype = enctype; form.target = frame.name;
    for (const [name, value] of fields) {
      const input = document.createElement("input");
      input.name = name; input.value = value; form.appendChild(input);
    }
    document.body.appendChild(form);
    // One result per form, whichever comes first: the timer used to add a second one when it fired
    // after the load (a slow machine), and the count of attempts came out too high.
    let done = false;
    const settle = extra => {
      if (done) return;
      done = true;
      results.push({kind: "form", action, enctype, ...extra});
      resolve();
    };
    frame.onload = () => settle({});
    setTimeout(() => settle({timeout: true}), 5000);
    form.submit();
  });
}

async function attack() {
  const bases = P.bases;
  const body = JSON.stringify({user: P.victim, message: "where is my boat?"});
  const victim = "/api/users/" + encodeURIComponent(P.victim);
  for (const base of bases) {
    for (const path of ["/api/memory/stats", "/api/distill", victim + "/recall?q=boat", "/healthz", "/"]) {
      await tryFetch("read", base + path);
      await tryFetch("read with cookies", base + path, {credentials: "include"});
    }
    const posts = [victim + "/context", "/api/memory/reindex", victim + "/distill/long", victim + "/distill/short"];
    for (const path of posts) {
      await tryFetch("json post", base + path, {method: "POST", body, headers: {"Content-Type": "application/json"}});
      await tryFetch("simple post", base + path, {method: "POST", body, headers: {"Content-Type": "text/plain"}});
      await tryFetch("no-cors post", base + path, {method: "POST", body, mode: "no-cors",
                                                    headers: {"Content-Type": "text/plain"}});
      await tryFetch("bodyless post", base + path + "?user=" + P.victim, {method: "POST", mode: "no-cors"});
    }
    for (const path of [victim + "/distill/long", "/api/memory/reindex"]) {
      // text/plain form carrying a JSON body: the classic way to smuggle JSON past a form.
      await formPost(base + path, "text/plain", [['{"user": "' + P.victim + '", "x": "', '"}']]);
      await formPost(base + path, "application/x-www-form-urlencoded", [["user", P.victim]]);
      await formPost(base + path, "multipart/form-data", [["user", P.victim]]);
    }
    await tryWs(base.replace(/^http/, "ws") + "/ws");
  }
  window.results = results;
  window.done = true;
}
attack();
</script>
</body>
"""


@pytest.fixture
async def chromium() -> AsyncIterator[Any]:
    # Its own resolver rules: a browser of its own (shared with nothing else), on the same thread.
    async for browser in shared_browser((*ARGS, RESOLVER, NO_LOCAL_NETWORK_CHECKS)):
        yield browser


async def _victim(gw: Gateway) -> str:
    """A user with a secret in the live session history and in memory."""
    user = await web_user(gw, "victim-web", "Vic", f"My boat is moored at {SECRET}.")
    gw.memory_store(user).write("USER.md", f"# Vic\n\n- keeps the boat at {SECRET}\n", source="test")
    return user


async def _attacker(params: dict[str, Any]) -> tuple[web.AppRunner, int]:
    page = ATTACK_PAGE.replace("__PARAMS__", json.dumps(params))

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    return await serve(app)


async def _run_attack(browser: Any, url: str, *, rebound_from: str | None = None) -> list[dict[str, Any]]:
    context = await browser.new_context()
    page = await context.new_page()
    if rebound_from is not None:
        # The DNS answer changes after the page loaded: the document itself still comes from the
        # attacker's server, every later request goes to 127.0.0.1, i.e. the daemon.
        async def from_attacker(route: Any) -> None:
            if not route.request.is_navigation_request():
                await route.continue_()  # the page's own requests: to the network, i.e. the daemon
                return
            response = await route.fetch(url=rebound_from)
            await route.fulfill(response=response)

        await page.route(url, from_attacker)
    await page.goto(url)
    await page.wait_for_function("() => window.done === true", timeout=120_000)
    results: list[dict[str, Any]] = await page.evaluate("window.results")
    await context.close()
    return results


def _leaks(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every result through which the page read something of the daemon's."""
    leaks = []
    for r in results:
        if r["kind"] == "fetch" and "error" not in r:
            readable = r["type"] != "opaque"
            if readable and (200 <= r["status"] < 300 or SECRET in r["body"] or "scopes" in r["body"]):
                leaks.append(r)
        if r["kind"] == "ws" and (r.get("opened") or r.get("messages")):
            leaks.append(r)
    return leaks


async def test_a_foreign_page_and_a_rebound_page_read_and_change_nothing(
    chromium: Any, make_gateway: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "kith.httpguard")
    gw = await make_gateway(**idle_bus())
    victim = await _victim(gw)
    dp = gw.port
    before = await footprint(gw)
    params = {"victim": victim, "victimClient": "victim-web",
              "bases": [f"http://127.0.0.1:{dp}", f"http://localhost:{dp}", f"http://evil.example:{dp}"]}
    runner, ap = await _attacker(params)
    rebound_params = {**params, "bases": [f"http://rebound.example:{dp}"]}  # same origin as the page
    rebound_runner, rap = await _attacker(rebound_params)
    try:
        foreign = await _run_attack(chromium, f"http://evil.example:{ap}/")
        rebound = await _run_attack(chromium, f"http://rebound.example:{dp}/",
                                    rebound_from=f"http://127.0.0.1:{rap}/")
    finally:
        await runner.cleanup()
        await rebound_runner.cleanup()
    per_base = 5 * 2 + 4 * 4 + 2 * 3 + 1
    assert len(foreign) == 3 * per_base and len(rebound) == per_base  # every attempt ran to its end
    assert _leaks(foreign) == [] and _leaks(rebound) == []
    assert SECRET not in json.dumps(foreign) + json.dumps(rebound)
    # On the rebound name the requests are same-origin, so the browser blocks nothing: the daemon
    # itself refused them (421), and the page saw only that.
    same_origin = [r for r in rebound if r["kind"] == "fetch" and "error" not in r]
    assert same_origin and {r["status"] for r in same_origin} == {421}
    assert not [r for r in foreign + rebound if r["kind"] == "form" and r.get("timeout")]

    await asyncio.sleep(0.5)  # anything a request managed to start would be queued by now
    assert await footprint(gw) == before
    assert gw.adapters["websocket"].health()["connections"] == 0
    # The requests did reach the daemon and were refused there (logged once a minute per kind).
    assert "refused a request for unknown Host" in caplog.text
    assert "refused a request from origin 'http://evil.example:" in caplog.text

    # The same browser reaches the daemon from its own origin: the web chat connects.
    page = await chromium.new_page()
    await page.goto(f"http://127.0.0.1:{dp}/")
    await page.wait_for_selector("#conn.on", timeout=10_000)
    await page.close()
