"""A bounded reader and writer of PNG ``tEXt`` chunks, for character cards (``ccv3`` / ``chara``).

Only the chunk layer is touched (length, type, data, CRC-32 over type and data; RFC 2083 / PNG spec
section 5), never pixels, so the standard library (``zlib.crc32``) is enough and no image library is
pulled in. Every length is checked against what is left of the file before anything is read, every CRC
is checked, and the file must start with the PNG signature and end with ``IEND``: a damaged or forged
file raises ``PngError`` with what is wrong and where, instead of yielding half a card.
"""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_CHUNK = 2**31 - 1  # the PNG spec's own limit for a chunk length


class PngError(ValueError):
    """Not a PNG, or a PNG whose chunk structure is damaged."""


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """Every chunk as (type, data), in order, up to and including ``IEND``."""
    if not data.startswith(SIGNATURE):
        raise PngError("not a PNG file (the 8-byte PNG signature is missing)")
    out: list[tuple[bytes, bytes]] = []
    pos = len(SIGNATURE)
    while True:
        if pos + 8 > len(data):
            raise PngError(f"truncated PNG: chunk header at byte {pos} is cut off (no IEND chunk)")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if not all(65 <= b <= 90 or 97 <= b <= 122 for b in kind):
            raise PngError(f"damaged PNG: chunk type {kind!r} at byte {pos} is not four ASCII letters")
        if length > MAX_CHUNK or pos + 12 + length > len(data):
            raise PngError(f"damaged PNG: chunk {kind.decode()} at byte {pos} claims {length} bytes, "
                           f"more than the file holds")  # fmt: skip
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise PngError(f"damaged PNG: CRC mismatch in chunk {kind.decode()} at byte {pos}")
        out.append((kind, body))
        pos += 12 + length
        if kind == b"IEND":
            return out
    # not reached


def text_chunks(data: bytes) -> dict[str, str]:
    """The ``tEXt`` chunks as {keyword: text} (Latin-1, as the spec says); the first of a keyword wins."""
    found: dict[str, str] = {}
    for kind, body in chunks(data):
        if kind != b"tEXt":
            continue
        keyword, sep, text = body.partition(b"\x00")
        if not sep or not 1 <= len(keyword) <= 79:
            raise PngError("damaged PNG: a tEXt chunk has no valid keyword")
        found.setdefault(keyword.decode("latin-1"), text.decode("latin-1"))
    return found


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def with_text(data: bytes, texts: dict[str, str]) -> bytes:
    """``data`` (a valid PNG) with ``texts`` as ``tEXt`` chunks before ``IEND``, replacing any earlier
    ``tEXt`` chunk of the same keywords; every other chunk is kept byte for byte."""
    out = [SIGNATURE]
    for kind, body in chunks(data):
        if kind == b"tEXt" and body.partition(b"\x00")[0].decode("latin-1") in texts:
            continue
        if kind == b"IEND":
            for keyword, text in texts.items():
                out.append(_chunk(b"tEXt", keyword.encode("latin-1") + b"\x00" + text.encode("latin-1")))
        out.append(_chunk(kind, body))
    return b"".join(out)


def blank_png() -> bytes:
    """A valid 1x1 transparent PNG: the image of a card exported from a persona that has none."""
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 1x1, 8-bit RGBA
    idat = zlib.compress(b"\x00\x00\x00\x00\x00")  # filter byte + one transparent pixel
    return SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
