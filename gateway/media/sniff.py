"""The real type of a file, from its first bytes: the name and the claimed mime type are the sender's
word, never trusted to pick a decoder."""

from __future__ import annotations

import io
import zipfile

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
AUDIO_TYPES = frozenset({"audio/ogg", "audio/mpeg", "audio/wav", "audio/mp4", "audio/webm", "audio/flac"})
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT = "application/vnd.oasis.opendocument.text"
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/html"})
DOCUMENT_TYPES = frozenset({"application/pdf", DOCX, ODT}) | TEXT_TYPES

_MARKDOWN_SUFFIXES = (".md", ".markdown")
_HTML_SUFFIXES = (".html", ".htm")


def sniff(data: bytes, name: str = "") -> str:
    """The file's type by content; ``application/octet-stream`` when kith does not recognise it."""
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
        return _office(data)
    return _text(data, name.lower())


def _office(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            if "word/document.xml" in names:
                return DOCX
            if "content.xml" in names and "mimetype" in names and zf.read("mimetype")[:64].strip() == ODT.encode():
                return ODT
    except (zipfile.BadZipFile, KeyError, OSError, ValueError):
        pass
    return "application/zip"


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
