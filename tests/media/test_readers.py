"""The readers on their own: type sniffing from bytes, documents to text (HTML, Markdown, .docx,
.odt), caps on characters, and hostile office XML."""

from __future__ import annotations

import io
import zipfile

import pytest

from gateway.media.documents import extract_text
from gateway.media.errors import Unsupported
from gateway.media.limits import MediaLimits
from gateway.media.sniff import DOCX, ODT, sniff
from gateway.media.store import safe_name
from tests.media.rig import pdf, png

LIMITS = MediaLimits()


def docx(paragraphs: list[str], *, extra: bytes = b"") -> bytes:
    ns = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    xml = extra + f'<w:document xmlns:w="{ns}"><w:body>{body}</w:body></w:document>'.encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", xml)
    return out.getvalue()


def odt(paragraphs: list[str]) -> bytes:
    ns = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
    body = "".join(f"<text:p>{p}</text:p>" for p in paragraphs)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("mimetype", ODT)
        zf.writestr("content.xml", f'<office:document-content xmlns:office="urn:x" xmlns:text="{ns}">'
                                   f"<office:body><office:text>{body}</office:text></office:body>"
                                   "</office:document-content>")  # fmt: skip
    return out.getvalue()


@pytest.mark.parametrize("data,name,expected", [
    (png(), "x.bin", "image/png"),
    (b"\xff\xd8\xff\xe0" + bytes(20), "", "image/jpeg"),
    (b"GIF89a" + bytes(20), "", "image/gif"),
    (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "", "image/webp"),
    (pdf(["hi"]), "notes.txt", "application/pdf"),
    (b"OggS\x00\x02" + bytes(20), "", "audio/ogg"),
    (b"ID3\x04" + bytes(20), "", "audio/mpeg"),
    (b"RIFF\x00\x00\x00\x00WAVEfmt ", "", "audio/wav"),
    (b"# Title\n\ntext", "readme.md", "text/markdown"),
    (b"plain words", "a.txt", "text/plain"),
    (b"<!DOCTYPE html><html><body>x</body></html>", "page", "text/html"),
    (docx(["a"]), "a.docx", DOCX),
    (odt(["a"]), "a.odt", ODT),
    (b"MZ\x90\x00\x03\x00\x00\x00\x04\x00", "cat.png", "application/octet-stream"),
    (b"\x00\x01\x02binary", "a.txt", "application/octet-stream"),
])  # fmt: skip
def test_the_type_comes_from_the_bytes(data: bytes, name: str, expected: str) -> None:
    assert sniff(data, name) == expected


def test_html_loses_its_tags_scripts_and_styles() -> None:
    page = (b"<html><head><title>T</title><style>p{color:red}</style></head><body><h1>Trip</h1>"
            b"<p>Leave on <b>Friday</b>.</p><script>alert('x')</script>"
            b"<ul><li>tent</li><li>stove</li></ul></body></html>")
    text = extract_text(page, "text/html", name="p.html", limits=LIMITS).text
    assert text == "Trip\nLeave on Friday.\ntent\nstove"


def test_office_documents_are_read_paragraph_by_paragraph() -> None:
    assert extract_text(docx(["First line.", "Second line."]), DOCX, name="a.docx", limits=LIMITS).text == \
        "First line.\n\nSecond line."
    assert extract_text(odt(["Eins.", "Zwei."]), ODT, name="a.odt", limits=LIMITS).text == "Eins.\n\nZwei."


def test_entity_declarations_in_office_xml_are_refused() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    with pytest.raises(Unsupported, match="damaged"):
        extract_text(docx(["&b;"], extra=bomb), DOCX, name="bomb.docx", limits=LIMITS)


def test_text_is_cut_at_the_character_cap_and_says_so() -> None:
    out = extract_text(b"word " * 1000, "text/plain", name="long.txt", limits=MediaLimits(max_chars=100))
    assert out.truncated and len(out.text) == 100


def test_pdf_text_and_pages() -> None:
    out = extract_text(pdf(["alpha page", "beta page"]), "application/pdf", name="a.pdf", limits=LIMITS)
    assert out.pages == 2 and "alpha page" in out.text and "beta page" in out.text


@pytest.mark.parametrize("name,expected", [
    ("holiday photo.png", "holiday-photo.png"),
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\me\\report.pdf", "report.pdf"),
    ("Grüße.txt", "Grue.txt"),
    ("...", "file"),
    ("", "file"),
])  # fmt: skip
def test_stored_names_are_one_safe_segment(name: str, expected: str) -> None:
    got = safe_name(name)
    assert "/" not in got and "\\" not in got and not got.startswith(".")
    assert got == expected


def test_images_are_turned_upright_and_downscaled() -> None:
    import io

    from PIL import Image

    from gateway.media.images import prepare_image

    img = Image.new("RGB", (400, 200), (10, 200, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to view
    out = io.BytesIO()
    img.save(out, format="JPEG", exif=exif)
    part = prepare_image(out.getvalue(), name="phone.jpg", limits=MediaLimits(image_max_side=100))
    seen = Image.open(io.BytesIO(part.data))
    assert part.mime_type == "image/jpeg" and seen.size == (50, 100), seen.size


def test_pending_uploads_are_capped_per_person_and_in_total() -> None:
    from gateway.media.errors import TooLarge
    from gateway.media.uploads import UploadStore

    store = UploadStore(MediaLimits(max_files=2, max_bytes=100, upload_total_bytes=1000))
    ids = [store.add(user_id="a", name=f"{i}.txt", mime_type="text/plain", data=b"x" * 10).upload_id for i in range(4)]
    with pytest.raises(TooLarge, match="waiting for a message"):
        store.add(user_id="a", name="5.txt", mime_type="text/plain", data=b"x")
    assert store.get(ids[0], user_id="b") is None, "another person's upload is unknown"
    assert store.take(ids[0]) is not None and store.take(ids[0]) is None, "handed over once"
    for i in range(9):
        store.add(user_id=f"u{i}", name="big", mime_type="", data=b"x" * 100)
    with pytest.raises(TooLarge, match="too many uploads"):
        store.add(user_id="z", name="big", mime_type="", data=b"x" * 100)
