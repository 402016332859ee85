"""The real type of a file, from its first bytes: the name and the claimed mime type are the sender's
word, never trusted to pick a decoder.

``sniff_magic`` looks at magic bytes only and is cheap enough for the event loop; a zip archive is
only ``application/zip`` to it. Telling a ``.docx`` or ``.odt`` from another zip means opening the
archive, which is parsing untrusted data: ``office_type`` does that, in the reader sandbox
(``gateway/media/sandbox.py``), reading at most 64 bytes of any entry.
"""

from __future__ import annotations

import io
import zipfile

from gateway.media.zipread import ZipRefused, read_entry

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
AUDIO_TYPES = frozenset({"audio/ogg", "audio/mpeg", "audio/wav", "audio/mp4", "audio/webm", "audio/flac"})
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT = "application/vnd.oasis.opendocument.text"
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/html"})
DOCUMENT_TYPES = frozenset({"application/pdf", DOCX, ODT}) | TEXT_TYPES

_MARKDOWN_SUFFIXES = (".md", ".markdown")
_HTML_SUFFIXES = (".html", ".htm")


ZIP = "application/zip"
_ODT_MIMETYPE_BYTES = 64


def sniff(data: bytes, name: str = "") -> str:
    """The file's type by content; ``application/octet-stream`` when kith does not recognise it.
    Opens a zip archive to tell office documents apart: run it in the reader sandbox."""
    mime = sniff_magic(data, name)
    return office_type(data) if mime == ZIP else mime


def sniff_magic(data: bytes, name: str = "") -> str:
    """The file's type from its magic bytes, without opening any container (``ZIP`` for an archive)."""
    head = data[:64]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "audio/mpeg"
    if head[4:8] == b"ftyp" and head[8:11] in (b"M4A", b"mp4", b"iso", b"M4B"):
        return "audio/mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "audio/webm"
    if head.startswith(b"PK\x03\x04"):
        return ZIP
    return _text(data, name.lower())


def office_type(data: bytes) -> str:
    """``DOCX`` or ``ODT`` for an office document, ``ZIP`` for any other archive (or a broken one)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            if "word/document.xml" in names:
                return DOCX
            if "content.xml" in names and "mimetype" in names:
                # Never zf.read(): the entry's declared size is the sender's word (issue 27).
                head = read_entry(zf, "mimetype", max_bytes=_ODT_MIMETYPE_BYTES, truncate=True)
                if head.strip() == ODT.encode():
                    return ODT
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, ZipRefused, NotImplementedError):
        pass
    return ZIP


def _text(data: bytes, name: str) -> str:
    if b"\x00" in data[:8192]:
        return "application/octet-stream"
    try:
        # A cut in the middle of a multi-byte character at the sample's end is still text.
        data[:65536].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < min(len(data), 65536) - 4:
            return "application/octet-stream"
    start = data[:512].lstrip().lower()
    if name.endswith(_HTML_SUFFIXES) or start.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    if name.endswith(_MARKDOWN_SUFFIXES):
        return "text/markdown"
    return "text/plain"
