"""``GET /api/users/{uid}/media/{path}``: a file a person sent, as its bytes, for the chat's thumbnails
and document chips in a conversation and in its history (docs/web.md#attachments).

A message that carried a file is stored with a Markdown link to it, relative to the person's tree
(``[photo.png](media/2026/11/3fa2c1d0e9b8-photo.png)``, ``gateway/media/pipeline.py``); the page turns
that link into this URL. Only the person and the operator reach it (``{uid}`` is checked like every
``/api/users`` route: anyone else gets 404), only under ``media/``, read through the person's guarded
``MemoryStore`` (contained in their tree, no symlink followed).

Only an image whose bytes say so (PNG, JPEG, GIF, WebP) is shown inline; everything else, SVG included,
is a download of type ``application/octet-stream``, so no file a person sent runs as a page of this
origin. ``Cross-Origin-Resource-Policy: same-origin`` and the ``SameSite=Strict`` cookie keep other
sites from embedding it.
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from aiohttp import web

from gateway.http.api.files import _guarded, _store
from gateway.http.api.spec import Answer, ApiError, Call, Route
from gateway.media.store import MEDIA_DIR

PATH = "/api/users/{uid}/media/{path:.+}"
# Magic bytes -> the type a browser may render inline. Nothing else is ever shown, only downloaded.
_IMAGES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
           (b"GIF89a", "image/gif"))  # fmt: skip
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Revalidated each time (a 304 by ETag costs a stat): a file forgotten through the forget path must
    # not live on in the browser's cache.
    "Cache-Control": "private, no-cache",
    "Referrer-Policy": "no-referrer",
}


def image_type(head: bytes) -> str | None:
    """The image type the first bytes show, or None: the name's extension is not trusted."""
    for magic, mime in _IMAGES:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _media_path(call: Call) -> str:
    path = call.param("path")
    if len(path) > 1024 or not path.startswith(f"{MEDIA_DIR}/"):
        raise ApiError(404, "no such file")  # only media: the memory files have their own route
    return path


async def media_file(call: Call) -> web.StreamResponse:
    store = _store(call, call.user_id())
    path = _media_path(call)

    def stat() -> tuple[int, float]:
        entry = store.stat(path)
        if entry.is_dir:
            raise ApiError(404, "no such file")
        return entry.size, entry.mtime

    size, mtime = await _guarded(stat)
    etag = '"' + hashlib.sha256(f"{path}\0{size}\0{mtime}".encode()).hexdigest()[:32] + '"'
    if etag in call.request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers={**HEADERS, "ETag": etag})
    data = await _guarded(lambda: store.read_bytes(path))
    mime = image_type(data[:16])
    name = path.rsplit("/", 1)[-1].split("-", 1)[-1]  # the stored "<random id>-<safe name>"
    disposition = "inline" if mime else "attachment"
    headers = {**HEADERS, "ETag": etag, "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(name)}"}
    return web.Response(body=data, content_type=mime or "application/octet-stream", headers=headers)


ROUTES = [
    Route("GET", PATH, "a file the person sent (images inline, anything else as a download)", Answer, media_file,
          tag="sessions", raw_answer=True, errors=(400, 401, 404),
          description="The bytes of media/... in the person's tree, the link a message with an attachment "
                      "carries. Images (PNG, JPEG, GIF, WebP, judged by their bytes) are served inline; "
                      "anything else as application/octet-stream with Content-Disposition: attachment."),
]
