"""The web pages' files over HTTP: the chat page at ``/``, its own files under ``/static/`` and the
front-end libraries vendored through ``gateway/web/package-lock.json`` under ``/static/vendor/``.

Only names on an allowlist are served: the files that exist under ``static/`` (matched as whole
relative paths, never joined onto the file system from the request) and the vendored files named in
``VENDOR``. Nothing is fetched from anywhere else: the page's Content-Security-Policy allows scripts,
styles and fonts from the daemon only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from functools import lru_cache
from pathlib import Path

from aiohttp import web

WEB_DIR = Path(__file__).resolve().parent
STATIC_DIR = WEB_DIR / "static"
# `npm ci` in scripts/setup installs here (gitignored); the daemon serves a few of its files.
NODE_MODULES = WEB_DIR / "node_modules"

# URL name under /static/vendor/ -> file inside node_modules. Self-contained ES modules only: the
# browser imports them directly, there is no bundler.
VENDOR: dict[str, str] = {
    "markdown-it.mjs": "markdown-it/dist/browser/markdown-it.esm.min.mjs",
    "purify.mjs": "dompurify/dist/purify.es.mjs",
}

CONTENT_TYPES: dict[str, str] = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".webmanifest": "application/manifest+json",
}

# 'self' only: no CDN, no inline script, no third-party font. connect-src names ws:/wss: because
# some browsers still do not let 'self' cover the WebSocket schemes of the same host.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; font-src 'self'; img-src 'self' data:; "
       "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
PAGE_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Our own files change with every kith upgrade: revalidate each time (cheap: 304 by ETag).
OWN_CACHE = "no-cache"
# Vendored files change only when the lock does; a day is short enough for an upgrade to show.
VENDOR_CACHE = "public, max-age=86400"


def static_names() -> set[str]:
    """Relative paths of the servable files under static/ (no dot files, known types only)."""
    names: set[str] = set()
    for path in STATIC_DIR.rglob("*"):
        rel = path.relative_to(STATIC_DIR)
        if path.is_file() and path.suffix in CONTENT_TYPES and not any(p.startswith(".") for p in rel.parts):
            names.add(rel.as_posix())
    return names


@lru_cache(maxsize=64)
def _read(path: Path, mtime_ns: int, size: int) -> tuple[bytes, str]:
    body = path.read_bytes()
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def file_response(request: web.Request, path: Path, cache: str, *, page: bool = False) -> web.StreamResponse:
    try:
        stat = path.stat()
    except OSError:
        raise web.HTTPNotFound() from None
    body, etag = _read(path, stat.st_mtime_ns, stat.st_size)
    headers = {**PAGE_HEADERS, "Cache-Control": cache, "ETag": etag} if page else {
        "X-Content-Type-Options": "nosniff", "Cache-Control": cache, "ETag": etag}
    if etag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, content_type=CONTENT_TYPES[path.suffix], charset=(
        "utf-8" if CONTENT_TYPES[path.suffix].startswith("text/") else None), headers=headers)


def page_handler(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A handler that serves the HTML page static/<name> with the page headers (CSP)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        return file_response(request, STATIC_DIR / name, OWN_CACHE, page=True)

    return handler


async def static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["path"]
    if name not in static_names():
        raise web.HTTPNotFound()
    return file_response(request, STATIC_DIR / name, OWN_CACHE, page=name.endswith(".html"))


async def vendor(request: web.Request) -> web.StreamResponse:
    target = VENDOR.get(request.match_info["name"])
    if target is None:
        raise web.HTTPNotFound()
    return file_response(request, NODE_MODULES / target, VENDOR_CACHE)


def root_file(name: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A handler that serves static/<name> at the site's root. The service worker must: a worker only
    controls the pages under the path it was served from. The manifest sits beside it."""

    async def handler(request: web.Request) -> web.StreamResponse:
        return file_response(request, STATIC_DIR / name, OWN_CACHE)

    return handler


def routes() -> list[web.RouteDef]:
    """The page routes; the WebSocket adapter mounts them next to /ws."""
    return [
        web.get("/", page_handler("index.html")),
        web.get("/sw.js", root_file("sw.js")),  # the chat's service worker (docs/web.md#installing-the-app)
        web.get("/manifest.webmanifest", root_file("manifest.webmanifest")),
        web.get("/console", page_handler("console.html")),  # the memory console (docs/web.md)
        web.get("/static/vendor/{name}", vendor),
        web.get("/static/{path:.+}", static),
    ]
