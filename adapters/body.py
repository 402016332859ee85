"""Reading a webhook body whole, and never more than a cap.

``request.content.read(n)`` returns whatever the socket has buffered so far, up to ``n`` bytes: a
body the sender wrote in two TCP segments comes back cut at the first one, so its signature (or its
JSON) no longer matches and a genuine delivery is refused. The body is read until EOF, and the read
stops one byte past the cap, so an oversized or endless body costs at most ``cap + 1`` bytes of memory.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

READ_TIMEOUT_S = 30.0  # a body trickled in slower than this holds a connection for nothing


class BodyTooLarge(Exception):
    """The body (declared or actually sent) is larger than the cap."""


async def read_body(request: web.Request, cap: int, *, timeout_s: float = READ_TIMEOUT_S) -> bytes:
    """The whole request body, at most ``cap`` bytes.

    Raises ``BodyTooLarge`` when ``Content-Length`` says more than ``cap`` (nothing is read then) or
    when more than ``cap`` bytes arrive, and ``TimeoutError`` when the body is not complete within
    ``timeout_s``.
    """
    declared = request.content_length
    if declared is not None and declared > cap:
        raise BodyTooLarge(f"declared {declared} bytes")
    chunks: list[bytes] = []
    size = 0
    async with asyncio.timeout(timeout_s):
        while True:
            chunk = await request.content.read(cap + 1 - size)
            if not chunk:  # EOF: the whole body is here
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                raise BodyTooLarge(f"over {cap} bytes")
