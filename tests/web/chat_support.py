"""Shared pieces of the chat page's browser tests (tests/web/test_chat_*.py).

A real gateway answering through the fake Anthropic server, and headless Chromium opening ``/`` at a
phone size (dark) and a desktop size (light). Screenshots of every view go to ``$KITH_SCREENSHOTS`` or
a fresh temporary directory (never into the repository).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import shared_browser

SIZES: dict[str, dict[str, Any]] = {
    "phone": {"viewport": {"width": 390, "height": 844}, "color_scheme": "dark", "is_mobile": True,
              "has_touch": True},
    "desktop": {"viewport": {"width": 1280, "height": 860}, "color_scheme": "light"},
}
T = 10_000  # ms: generous waits for a 2-core machine shared with other test runs


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """The test process's Chromium (tests/browser.py); the contexts a test opens close after it."""
    async for b in shared_browser():
        yield b


_SHOTS: list[Path] = []


def shots_dir() -> Path:
    if not _SHOTS:
        root = os.environ.get("KITH_SCREENSHOTS")
        path = Path(root) if root else Path(tempfile.mkdtemp(prefix="kith-chat-shots-"))
        path.mkdir(parents=True, exist_ok=True)
        _SHOTS.append(path)
    return _SHOTS[0]


async def shot(page: Any, name: str, size: str) -> Path | None:
    """A screenshot when ``$KITH_SCREENSHOTS`` names a directory (to look at the pages); else none."""
    if not os.environ.get("KITH_SCREENSHOTS"):
        return None
    path = shots_dir() / f"chat-{name}-{size}.png"
    await page.screenshot(path=str(path))
    return path


async def wait_until(page: Any, expression: str, timeout_ms: int = T) -> None:
    """Poll a JavaScript expression until it is truthy. (Playwright's wait_for_function evals its
    predicate inside the page. A function, "() => ...", is evaluated once, while DevTools may; a bare
    expression again at each poll, which the page's CSP, rightly without 'unsafe-eval', refuses.)"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    while not await page.evaluate(expression):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {expression}")
        await asyncio.sleep(0.05)


class Chat:
    """One browser page on the chat, driven as a person would: type, press Enter, read bubbles."""

    def __init__(self, page: Any, size: str, errors: list[str]) -> None:
        self.page = page
        self.size = size
        self.errors = errors

    async def send(self, text: str) -> None:
        await self.page.fill("#input", text)
        await self.page.press("#input", "Enter")

    async def reply_after(self, text: str, *, notice: bool = False) -> Any:
        """Send and wait for the next finished answer bubble; returns it."""
        kind = ".msg.notice" if notice else ".msg.bot:not(.streaming)"
        before = await self.page.locator(kind).count()
        await self.send(text)
        bubble = self.page.locator(kind).nth(before)
        await bubble.wait_for(timeout=T)
        return bubble

    async def shot(self, name: str) -> Path:
        return await shot(self.page, name, self.size)


async def open_chat(browser: Any, gw: Any, size: str, *, client_id: str | None = None) -> Chat:
    context = await browser.new_context(**SIZES[size])
    context.set_default_timeout(T)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # A failed request is reported by its URL (the console only says "Failed to load resource").
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error"
            and not msg.text.startswith("Failed to load resource") else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    if client_id is not None:
        await context.add_init_script(f"localStorage.setItem('kith.client_id', {client_id!r})")
    await page.goto(f"http://127.0.0.1:{gw.port}/")
    await page.wait_for_selector("#conn.on", timeout=T)
    # The conversation so far is shown before a test counts bubbles in it (chat/main.js, historyBusy).
    await page.wait_for_selector("#log:not([aria-busy])", timeout=T)
    return Chat(page, size, errors)
