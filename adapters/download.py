"""Downloading a platform file with a byte cap, for ``Adapter.fetch_attachment``.

The cap is enforced twice: a ``Content-Length`` over it refuses the file before its body is read,
and the body is read in chunks and dropped one chunk past the cap, so a server that lies about the
length (or sends none) costs at most ``max_bytes`` plus one chunk of memory. Redirects are never
followed: the caller vetted the URL's host, and a redirect could point anywhere.

Error texts never include the URL: Telegram file URLs carry the bot token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp

from gateway.media.errors import AttachmentUnavailable, TooLarge

DOWNLOAD_TIMEOUT_S = 120.0  # a file trickled in slower than this holds a connection for nothing
_CHUNK = 64 * 1024


def mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def check_declared(size: int, max_bytes: int, what: str) -> None:
    """Refuse a file whose platform-declared size is already over the cap (nothing is downloaded)."""
    if size > max_bytes:
        raise TooLarge(f"{what} is {mib(size)}, over the {mib(max_bytes)} limit")


async def download(
    session: aiohttp.ClientSession,
    url: str,
    *,
    max_bytes: int,
    what: str,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = DOWNLOAD_TIMEOUT_S,
) -> bytes:
    """GET ``url`` and return its body, at most ``max_bytes`` of it.

    Raises ``TooLarge`` past the cap, ``AttachmentUnavailable`` for any answer but 200 or a
    connection that fails or stalls.
    """
    try:
        async with asyncio.timeout(timeout_s):
            # The session's own total timeout (made for small API calls) gives way to timeout_s here.
            per_request = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=60)
            # identity: a compressed body would be inflated before the cap could count it.
            wanted = {"Accept-Encoding": "identity", **(headers or {})}
            async with session.get(url, headers=wanted, allow_redirects=False, timeout=per_request) as resp:
                if resp.status != 200:
                    raise AttachmentUnavailable(f"{what} could not be downloaded (the server answered {resp.status})")
                if resp.content_length is not None:
                    check_declared(resp.content_length, max_bytes, what)
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_chunked(_CHUNK):
                    size += len(chunk)
                    if size > max_bytes:
                        raise TooLarge(f"{what} is over the {mib(max_bytes)} limit")
                    chunks.append(chunk)
                return b"".join(chunks)
    except TimeoutError:
        raise AttachmentUnavailable(f"{what} took too long to download") from None
    except aiohttp.ClientError as exc:
        raise AttachmentUnavailable(f"{what} could not be downloaded ({exc.__class__.__name__})") from None
