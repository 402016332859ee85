"""One headless Chromium per test process, a fresh browser context per test.

Launching Playwright's driver and Chromium cost 2-4 s per browser test, a fifth of the whole suite.
Playwright's objects belong to the event loop that created them, and every test runs on its own loop
(pytest-asyncio, function scope), so the browser cannot simply be a session fixture. Instead it lives
on a loop of its own, in a thread started on first use and stopped when the process exits, and tests
hold ``Remote`` handles: a coroutine method runs on the browser's loop and the test awaits its result
from its own loop; a plain method or property runs on the browser's loop too, and returns at once.
Handlers a test registers (``page.on``, ``page.route``) run on the browser's loop with the real objects.

The ``browser`` fixture (tests/web/chat_support.py and friends) hands out the shared browser and closes
every context the test opened, so no cookie, storage or page outlives its test.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import os
import shutil
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

# Debian's headless shell (Chromium's "old headless", the Blink of the same version without the
# browser's UI layers) before Debian's full chromium: a chat page load costs 0.7 s of CPU in it against
# 1.6-2.3 s (docs/development.md), and the browser tests are a third of the suite. KITH_CHROMIUM picks
# another build.
CHROMIUM = (os.environ.get("KITH_CHROMIUM") or shutil.which("chromium-headless-shell") or shutil.which("chromium")
            or "/usr/bin/chromium-headless-shell")
ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run")


class _BrowserLoop:
    """The thread and event loop Playwright runs on, and the browsers launched there (one per set of
    command-line arguments: a test that needs special flags gets its own, shared with its kind)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="playwright", daemon=True)
        self.thread.start()
        self._pw: Any = None
        self._browsers: dict[tuple[str, ...], Any] = {}

    def run(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A plain (not async) function on the browser's loop, waited for here."""
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def invoke() -> None:
            try:
                done.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the caller, who raises it
                done.set_exception(exc)

        self.loop.call_soon_threadsafe(invoke)
        return done.result(60)

    async def _launch(self, args: tuple[str, ...]) -> Any:
        if self._pw is None:
            from playwright.async_api import async_playwright

            self._pw = await async_playwright().start()
        browser = self._browsers.get(args)
        if browser is None or not browser.is_connected():
            browser = await self._pw.chromium.launch(executable_path=CHROMIUM, args=list(args), headless=True)
            self._browsers[args] = browser
        return browser

    def browser(self, args: tuple[str, ...]) -> Any:
        return self.run(self._launch(args), timeout=120)

    async def _stop(self) -> None:
        for browser in self._browsers.values():
            try:
                await browser.close()
            except Exception:
                pass
        if self._pw is not None:
            await self._pw.stop()

    def stop(self) -> None:
        try:
            self.run(self._stop(), timeout=30)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


_LOOP: list[_BrowserLoop] = []


def _browser_loop() -> _BrowserLoop:
    if not _LOOP:
        _LOOP.append(_BrowserLoop())
        atexit.register(_LOOP[0].stop)
    return _LOOP[0]


def _is_playwright(value: Any) -> bool:
    from playwright._impl._async_base import AsyncBase

    return isinstance(value, AsyncBase)


def _wrap(value: Any) -> Any:
    if _is_playwright(value):
        return Remote(value)
    if isinstance(value, list) and value and all(_is_playwright(v) for v in value):
        return [Remote(v) for v in value]
    return value


def _unwrap(value: Any) -> Any:
    return value._obj if isinstance(value, Remote) else value


class Remote:
    """A Playwright object (browser, context, page, locator, keyboard...) used from another loop."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any) -> None:
        object.__setattr__(self, "_obj", obj)

    def __getattr__(self, name: str) -> Any:
        loop = _browser_loop()
        value = loop.call(getattr, self._obj, name)
        if inspect.iscoroutinefunction(value):
            async def remote_call(*args: Any, **kwargs: Any) -> Any:
                args = tuple(_unwrap(a) for a in args)
                kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
                future = asyncio.run_coroutine_threadsafe(value(*args, **kwargs), loop.loop)
                return _wrap(await asyncio.wrap_future(future))

            return remote_call
        if callable(value) and not _is_playwright(value):
            def plain_call(*args: Any, **kwargs: Any) -> Any:
                args = tuple(_unwrap(a) for a in args)
                kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
                return _wrap(loop.call(value, *args, **kwargs))

            return plain_call
        return _wrap(value)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._obj, name, value)  # e.g. a test's own bookkeeping on a page

    def __eq__(self, other: object) -> bool:
        return self._obj is _unwrap(other)

    def __hash__(self) -> int:
        return id(self._obj)

    def __repr__(self) -> str:
        return f"Remote({self._obj!r})"


async def shared_browser(args: Sequence[str] = ARGS) -> AsyncIterator[Remote]:
    """Body of a ``browser`` fixture: the process's Chromium (launched on first use) for one test, and
    afterwards every context the test opened is closed."""
    if shutil.which(CHROMIUM) is None:
        if os.environ.get("KITH_REQUIRE_BROWSER"):
            pytest.fail("Debian's chromium-headless-shell is required for the browser tests"
                        " (apt-get install chromium-headless-shell)")
        pytest.skip("Debian chromium-headless-shell not installed")
    loop = _browser_loop()
    browser = await asyncio.to_thread(loop.browser, tuple(args))
    before = set(loop.call(lambda: list(browser.contexts)))
    try:
        yield Remote(browser)
    finally:
        opened = [c for c in loop.call(lambda: list(browser.contexts)) if c not in before]
        for context in opened:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(context.close(), loop.loop))
