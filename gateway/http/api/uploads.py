"""``POST /api/uploads``: a file for the next message (web chat, WebSocket clients; docs/media.md).

The body is the file itself, raw, with its own ``Content-Type`` and its name in ``X-Filename``
(percent-encoded UTF-8); the answer is an ``upload_id`` that a ``message`` frame names in its
``attachments`` (docs/protocol.md#attachments). The upload is held in memory for its person only
(``gateway/media/uploads.py``): nothing is written to disk until a message takes it in. The body is
read in chunks and refused (413) as soon as it passes the size cap, never buffered whole first.
``DELETE /api/uploads/{upload_id}`` takes an upload back before a message uses it (the web chat's
chip removal), so its bytes stop counting against its person's and everyone's upload budget.
"""

from __future__ import annotations

from urllib.parse import unquote

from gateway.http.api.spec import Answer, ApiError, Call, Route
from gateway.media.errors import TooLarge
from gateway.media.limits import media_limits
from gateway.media.names import clean_name
from gateway.media.uploads import uploads

FILENAME_HEADER = "X-Filename"
PATH = "/api/uploads"


class Uploaded(Answer):
    upload_id: str
    name: str
    size: int
    mime_type: str  # as the client declared it; the real type is read from the bytes when it is used


async def _upload(call: Call) -> Uploaded:
    who = call.who()
    if who.user_id is None:
        raise ApiError(403, "uploads belong to a person: sign in as one (the operator token names nobody)")
    request = call.request
    limit = media_limits(call.gateway).max_bytes
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, f"the file is {request.content_length:,} bytes; the limit is {limit:,}")
    data = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        data += chunk
        if len(data) > limit:
            raise ApiError(413, f"the file is over the limit of {limit:,} bytes")
    if not data:
        raise ApiError(400, "the body is empty: send the file's bytes as the request body")
    name = clean_name(unquote(request.headers.get(FILENAME_HEADER, "")))
    mime = request.content_type if request.content_type != "application/octet-stream" else ""
    try:
        upload = uploads(call.gateway).add(user_id=who.user_id, name=name, mime_type=mime, data=bytes(data))
    except TooLarge as exc:
        raise ApiError(413, str(exc)) from None
    return Uploaded(upload_id=upload.upload_id, name=upload.name, size=len(upload.data), mime_type=mime)


class Cancelled(Answer):
    upload_id: str
    cancelled: bool


async def _cancel(call: Call) -> Cancelled:
    who = call.who()
    if who.user_id is None:
        raise ApiError(403, "uploads belong to a person: sign in as one (the operator token names nobody)")
    upload_id = call.param("upload_id")
    if not uploads(call.gateway).cancel(upload_id, user_id=who.user_id):
        # Unknown, expired, already sent or another person's: all the same answer.
        raise ApiError(404, "no such upload waiting (already sent, expired, or never uploaded)")
    return Cancelled(upload_id=upload_id, cancelled=True)


ROUTES = [
    Route("POST", PATH, "upload a file for the next message", Uploaded, _upload, status=201, tag="media",
          errors=(400, 401, 403, 413), raw_body=True,
          description="The body is the file, with its Content-Type; X-Filename names it (percent-encoded). "
                      "Send the answer's upload_id in a WebSocket message frame's attachments. Uploads "
                      "are held in memory for an hour at most and stored only when a message uses them "
                      "(never Off-The-Record). Limits and formats: docs/media.md."),
    Route("DELETE", PATH + "/{upload_id}", "take back an upload no message has used yet", Cancelled, _cancel,
          tag="media", errors=(401, 403, 404),
          description="Drops the person's own upload (the web chat's chip removal), so it no longer counts "
                      "against their upload budget. Another person's upload, or one already sent or expired, "
                      "is 404."),
]
