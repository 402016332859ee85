"""Documents to text: PDF (pypdf), plain text, Markdown, HTML (the standard library's parser), Word
``.docx`` and OpenDocument ``.odt`` (their XML, read with ``defusedxml``).

Every reader is bounded in pages, characters and input size, and blocking: the pipeline runs it in
the reader sandbox (``gateway/media/sandbox.py``), a separate process under memory and CPU limits,
never on the event loop. Refusals are ``TooLarge`` or ``Unsupported`` with a reply for the person.
"""

from __future__ import annotations

import io
import logging
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from gateway.media.errors import TooLarge, Unsupported
from gateway.media.limits import MediaLimits
from gateway.media.sniff import DOCX, ODT
from gateway.media.zipread import EntryTooLarge, UnsupportedMethod, read_entry

log = logging.getLogger("kith.media")
logging.getLogger("pypdf").setLevel(logging.ERROR)  # a malformed PDF is the sender's, not an operator alarm
# pypdf is imported by the first PDF, not with the daemon: it costs ~0.2 s of every start otherwise.


@dataclass(frozen=True, slots=True)
class Extracted:
    text: str
    truncated: bool = False
    pages: int = 0


def extract_text(data: bytes, mime_type: str, *, name: str, limits: MediaLimits) -> Extracted:
    if mime_type == "application/pdf":
        return _pdf(data, name=name, limits=limits)
    if mime_type == "text/html":
        return _cut(_html(_decode(data)), limits)
    if mime_type in ("text/plain", "text/markdown"):
        return _cut(_decode(data), limits)
    if mime_type == DOCX:
        return _cut(_office_xml(data, "word/document.xml", name=name, limits=limits), limits)
    if mime_type == ODT:
        return _cut(_office_xml(data, "content.xml", name=name, limits=limits), limits)
    raise Unsupported(f"{name}: kith cannot read {mime_type} files")


def _cut(text: str, limits: MediaLimits, pages: int = 0) -> Extracted:
    text = text.strip()
    if len(text) > limits.max_chars:
        return Extracted(text[: limits.max_chars], truncated=True, pages=pages)
    return Extracted(text, pages=pages)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def _pdf(data: bytes, *, name: str, limits: MediaLimits) -> Extracted:
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            # Owner-password-only files open with an empty user password; anything else is locked.
            try:
                opened = reader.decrypt("") != PasswordType.NOT_DECRYPTED
            except (FileNotDecryptedError, DependencyError, PdfReadError, NotImplementedError):
                opened = False
            if not opened:
                raise Unsupported(f"{name}: the PDF is encrypted; send it without a password")
        pages = len(reader.pages)
        if pages > limits.max_pages:
            raise TooLarge(f"{name}: the PDF has {pages:,} pages; kith reads at most {limits.max_pages}")
        parts: list[str] = []
        total = 0
        for page in reader.pages:
            piece = page.extract_text() or ""
            parts.append(piece)
            total += len(piece)
            if total > limits.max_chars:
                break
    except (TooLarge, Unsupported):
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError,
            AssertionError, OSError, ZeroDivisionError) as exc:  # fmt: skip
        # pypdf surfaces a broken file as any of these, deep inside its object parser.
        raise Unsupported(f"{name}: the PDF is damaged and could not be read ({type(exc).__name__})") from None
    return _cut("\n\n".join(parts), limits, pages)


class _HTMLText(HTMLParser):
    _SKIP = frozenset({"script", "style", "head", "template", "noscript", "svg"})
    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
                        "article", "blockquote", "pre", "table", "ul", "ol", "hr", "title"})  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.out.append(data)


def _html(source: str) -> str:
    parser = _HTMLText()
    parser.feed(source)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.out).splitlines())
    return "\n".join(line for line in lines if line)


# Real documents nest tables in tables and text boxes in runs, a few dozen levels at most. A 48 KB file
# can nest three million runs (issue 27): refused at this depth, before the tree is built.
MAX_XML_DEPTH = 512

_PARAGRAPHS = frozenset({
    "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}p",
    "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}p",
    "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}h",
})


def _office_xml(data: bytes, member: str, *, name: str, limits: MediaLimits) -> str:
    damaged = f"{name}: the document is damaged and could not be read"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            # Streamed and counted: the directory's file_size is the sender's word (issue 27).
            xml = read_entry(zf, member, max_bytes=limits.max_unpacked_bytes)
    except EntryTooLarge:
        raise TooLarge(f"{name}: the document unpacks to more than {limits.max_unpacked_bytes:,} bytes of text "
                       "markup (a zip bomb?)") from None  # fmt: skip
    except UnsupportedMethod:
        raise Unsupported(f"{name}: the document is packed with a compression office files do not use; "
                          "save it again from a word processor") from None  # fmt: skip
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, NotImplementedError, EOFError):
        raise Unsupported(damaged) from None
    try:
        root = _parse_office_xml(xml, name=name)
    except (ParseError, DefusedXmlException, ValueError):
        raise Unsupported(damaged) from None
    paragraphs: list[str] = []
    for element in root.iter():
        if element.tag in _PARAGRAPHS:
            text = "".join(element.itertext()).strip()
            if text:
                paragraphs.append(text)
    return "\n\n".join(paragraphs)


def _parse_office_xml(xml: bytes, *, name: str) -> Element:
    # Office XML never has a DTD: one is refused whatever the encoding (UTF-16 included), so no
    # entity can expand; defusedxml checks the parser's events, not the bytes.
    events = iterparse(io.BytesIO(xml), events=("start", "end"), forbid_dtd=True, forbid_entities=True,
                       forbid_external=True)  # fmt: skip
    depth = 0
    root: Element | None = None
    for event, element in events:
        if event == "start":
            depth += 1
            if depth > MAX_XML_DEPTH:
                raise Unsupported(f"{name}: the document nests its parts more than {MAX_XML_DEPTH} levels deep, "
                                  "which no word processor writes")  # fmt: skip
            if root is None:
                root = element
        else:
            depth -= 1
    if root is None:
        raise ValueError("no root element")
    return root
