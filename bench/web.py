"""``kith bench web``: how fast the web chat opens, in headless Chromium on loopback.

A gateway with the echo model runs in this process (a temporary data dir, port 0, every memory stage
on as ``kith run`` has them); Chromium (Debian's ``chromium``, driven by Playwright) opens ``/``:

* ``first_paint_ms``: the page's ``first-contentful-paint`` (Paint Timing), from navigation start;
* ``ready_ms``: from navigation start until a person can type and send: the socket is connected and
  Send is enabled (observed in the page: a MutationObserver on ``#send`` stamps ``performance.now()``).

``cold``: a fresh browser context each time (empty HTTP cache, no service worker); ``warm``: a second
load in that context once its service worker controls the page (the app shell from the worker's
cache, kith revalidating its files). ``--runs`` of each; medians and the worst printed, each run as a
line of JSON before the summary (the last line). Keep it short: Chromium's start is not measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine
from gateway.configread import parse_config

# The page load a person sees is the full browser's; Debian's headless shell (the same Blink, which is
# all `scripts/setup --test` installs) stands in where there is no chromium. KITH_CHROMIUM picks one.
CHROMIUM = (os.environ.get("KITH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-headless-shell")
            or "/usr/bin/chromium")
TIMEOUT_MS = 20_000
# Stamps the moment Send becomes usable (enabled with the socket connected), in the page's own clock.
STAMP_READY = """
(() => {
  const check = () => {
    const send = document.getElementById("send"), conn = document.getElementById("conn");
    if (send && conn && !send.disabled && conn.classList.contains("on") && !window.__kithReady) {
      window.__kithReady = performance.now();
    }
  };
  new MutationObserver(check).observe(document, { subtree: true, attributes: true, childList: true });
})();
"""
READ = """() => {
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  return { first_paint_ms: paint ? paint.startTime : null, ready_ms: window.__kithReady || null,
           controlled: !!(navigator.serviceWorker && navigator.serviceWorker.controller) };
}"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="cold loads and warm loads measured (each)")
    parser.add_argument("--viewport", default="1280x860", help="WIDTHxHEIGHT (390x844: a phone)")


async def _load(page: Any, url: str) -> dict[str, Any]:
    await page.goto(url, wait_until="load", timeout=TIMEOUT_MS)
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        got = await page.evaluate(READ)
        if got["ready_ms"] is not None and got["first_paint_ms"] is not None:
            return {k: round(v, 1) if isinstance(v, float) else v for k, v in got.items()}
        if time.monotonic() > deadline:
            raise RuntimeError(f"the page was not ready within {TIMEOUT_MS} ms: {got}")
        await asyncio.sleep(0.01)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("first_paint_ms", "ready_ms"):
        values = [r[key] for r in runs]
        out[key] = {"median": round(statistics.median(values), 1), "max": round(max(values), 1)}
    return out


async def _bench(runs: int, viewport: dict[str, int]) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    from gateway.app import Gateway

    with tempfile.TemporaryDirectory(prefix="kith-bench-web-") as tmp:
        cfg = parse_config({"data_dir": str(Path(tmp) / "data"), "llm": {"provider": "echo"}, "server": {"port": 0},
                            "plugins": {"entry_points": False}, "log_level": "WARNING"}, env={})  # fmt: skip
        async with Gateway(cfg, entry_points=False) as gw, async_playwright() as pw:
            url = f"http://127.0.0.1:{gw.port}/"
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-gpu", "--no-first-run"])  # fmt: skip
            cold: list[dict[str, Any]] = []
            warm: list[dict[str, Any]] = []
            try:
                for i in range(runs + 1):  # the first cold load warms the daemon's own caches: not counted
                    context = await browser.new_context(viewport=viewport)
                    await context.add_init_script(STAMP_READY)
                    page = await context.new_page()
                    first = await _load(page, url)
                    await page.evaluate("navigator.serviceWorker.ready.then(() => true)")
                    second = await _load(page, url)
                    await context.close()
                    if i == 0:
                        continue
                    cold.append(first)
                    warm.append(second)
                    print(json.dumps({"run": i, "cold": first, "warm": second}), flush=True)
            finally:
                await browser.close()
    return {"runs": runs, "viewport": viewport, "cold": _summary(cold), "warm": _summary(warm),
            "warm_from_service_worker": all(r["controlled"] for r in warm), "machine": machine(), "browser": CHROMIUM,
            "command": "kith bench web " + " ".join(sys.argv[3:])}  # fmt: skip


def main(args: argparse.Namespace) -> int:
    if shutil.which(CHROMIUM) is None:
        print("kith bench web needs Chromium (Debian: apt-get install chromium or chromium-headless-shell)",
              file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("kith bench web needs Playwright (pip install -e '.[test]')", file=sys.stderr)
        return 2
    width, _, height = args.viewport.partition("x")
    result = asyncio.run(_bench(max(1, args.runs), {"width": int(width), "height": int(height)}))
    print(json.dumps(result))
    return 0
