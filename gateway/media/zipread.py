"""One entry of an untrusted zip archive (``.docx``, ``.odt``), read with a running byte cap.

The sizes in a zip's directory are the sender's word: a 3 KB file can declare 39 bytes and inflate
to gigabytes (issue 27). So an entry is streamed through ``ZipFile.open`` and counted as it
inflates, and reading stops at the cap whatever the directory says. Only the two methods office
files use are accepted: stored and deflate. bzip2 and LZMA reach ratios deflate cannot (a few KB
to gigabytes) and no office suite writes them, so they are refused before anything is inflated.
"""

from __future__ import annotations

import zipfile

ACCEPTED_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})
_CHUNK = 64 * 1024


class ZipRefused(Exception):
    """An entry kith will not read; the message says why, without the file's name."""


class EntryTooLarge(ZipRefused):
    def __init__(self, member: str, limit: int) -> None:
        super().__init__(f"{member} unpacks to more than {limit:,} bytes")
        self.member = member
        self.limit = limit


class UnsupportedMethod(ZipRefused):
    def __init__(self, member: str, method: int) -> None:
        super().__init__(f"{member} is packed with compression method {method}, which office files do not use")
        self.member = member
        self.method = method


def read_entry(zf: zipfile.ZipFile, member: str, *, max_bytes: int, truncate: bool = False) -> bytes:
    """The entry's bytes, at most ``max_bytes`` of them: past that, ``EntryTooLarge`` (or the first
    ``max_bytes`` when ``truncate``). ``KeyError`` when there is no such entry."""
    info = zf.getinfo(member)
    if info.compress_type not in ACCEPTED_METHODS:
        raise UnsupportedMethod(member, info.compress_type)
    out = bytearray()
    with zf.open(info) as stream:
        while True:
            # Never more than one chunk past the cap is inflated, whatever the entry declares.
            chunk = stream.read(min(_CHUNK, max_bytes - len(out) + 1))
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > max_bytes:
                if truncate:
                    return bytes(out[:max_bytes])
                raise EntryTooLarge(member, max_bytes)
