"""Hostile office files, built in the test (no binary blob is committed): zip entries that inflate
to gigabytes from a few kilobytes, XML that nests millions of elements, entity bombs in UTF-16.

The zip is written by hand because ``zipfile`` can only write what it compressed itself, and a bomb
needs pre-compressed data and, sometimes, a directory that lies about the sizes.
"""

from __future__ import annotations

import bz2
import struct
import zipfile
import zlib
from dataclasses import dataclass

MIB = 1024 * 1024
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
ODT_MIME = b"application/vnd.oasis.opendocument.text"


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    packed: bytes
    method: int = zipfile.ZIP_STORED
    crc: int = 0
    size: int = 0  # the unpacked size the directory declares (the sender's word)

    @classmethod
    def stored(cls, name: str, data: bytes) -> Entry:
        return cls(name, data, zipfile.ZIP_STORED, zlib.crc32(data), len(data))

    @classmethod
    def deflated(cls, name: str, data: bytes) -> Entry:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return cls(name, c.compress(data) + c.flush(), zipfile.ZIP_DEFLATED, zlib.crc32(data), len(data))


def raw_zip(entries: list[Entry]) -> bytes:
    out = bytearray()
    central = bytearray()
    for e in entries:
        name = e.name.encode()
        version = 46 if e.method == zipfile.ZIP_BZIP2 else 20
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, e.method, 0, 0x21, e.crc, len(e.packed), e.size,
                           len(name), 0) + name + e.packed  # fmt: skip
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, version, 0, e.method, 0, 0x21, e.crc,
                               len(e.packed), e.size, len(name), 0, 0, 0, 0, 0, offset) + name  # fmt: skip
    start = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), start, 0)
    return bytes(out)


def deflate_zeros(total_mib: int) -> tuple[bytes, int]:
    """Raw deflate of ``total_mib`` MiB of zeros (about 1 KB per MiB) and its CRC, made in
    milliseconds: after a full flush the compressor starts afresh, so one MiB's block repeats."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(b"\0" * MIB) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    zeros = b"\0" * MIB
    for _ in range(total_mib):
        crc = zlib.crc32(zeros, crc)
    return block * total_mib + b"\x03\x00", crc  # an empty final block ends the stream


def bzip2_zeros(blocks: int) -> bytes:
    """A bzip2 stream of ``blocks`` identical blocks of about 45 MB of zeros each (a few dozen bytes
    per block): 70 blocks is 3 KB that inflate to 3.1 GB. Blocks are bit-aligned, so the stream is
    put together bit by bit, with the combined CRC the format asks for."""
    one = bz2.compress(b"\0" * 45_000_000, 9)
    bits = "".join(f"{b:08b}" for b in one)
    eos = bits.index(f"{0x177245385090:048b}", 32)
    block = bits[32:eos]
    block_crc = int(block[48:80], 2)
    combined = 0
    for _ in range(blocks):
        combined = ((combined << 1) | (combined >> 31)) & 0xFFFFFFFF
        combined ^= block_crc
    stream = bits[:32] + block * blocks + f"{0x177245385090:048b}" + f"{combined:032b}"
    stream += "0" * (-len(stream) % 8)
    return int(stream, 2).to_bytes(len(stream) // 8, "big")


def docx_with(document_xml: Entry) -> bytes:
    return raw_zip([Entry.stored("[Content_Types].xml", b"<Types/>"), document_xml])


def bzip2_docx(blocks: int = 70) -> bytes:
    """A .docx whose document.xml is bzip2 (3 KB, 3.1 GB inflated) and claims to be 5,000 bytes."""
    return docx_with(Entry("word/document.xml", bzip2_zeros(blocks), zipfile.ZIP_BZIP2, 0, 5_000))


def bzip2_odt(blocks: int = 70) -> bytes:
    """An .odt whose ``mimetype`` entry is a bzip2 bomb: the type check itself would inflate it."""
    return raw_zip([Entry("mimetype", bzip2_zeros(blocks), zipfile.ZIP_BZIP2, 0, len(ODT_MIME)),
                    Entry.deflated("content.xml", b"<office:document-content/>")])  # fmt: skip


def deflate_odt(total_mib: int = 1000) -> bytes:
    """An .odt of about 1 MB whose ``mimetype`` entry inflates to ``total_mib`` MiB (sizes honest)."""
    packed, crc = deflate_zeros(total_mib)
    return raw_zip([Entry("mimetype", packed, zipfile.ZIP_DEFLATED, crc, total_mib * MIB),
                    Entry.deflated("content.xml", b"<office:document-content/>")])  # fmt: skip


def nested_runs_docx(depth: int = 3_000_000) -> bytes:
    """A .docx of about 48 KB whose one paragraph nests ``depth`` runs, each inside the last."""
    xml = (f'<w:document xmlns:w="{W_NS}"><w:body><w:p>'.encode() + b"<w:r>" * depth + b"<w:t>deep</w:t>"
           + b"</w:r>" * depth + b"</w:p></w:body></w:document>")  # fmt: skip
    return docx_with(Entry.deflated("word/document.xml", xml))


def utf16_entity_docx(copies: int = 200) -> bytes:
    """A .docx whose document.xml is UTF-16 and declares an entity (a byte check for ``<!ENTITY``
    does not see it: every other byte is a zero) used ``copies`` times."""
    payload = "A" * 10_000
    body = "".join("<w:r><w:t>&big;</w:t></w:r>" for _ in range(copies))
    xml = (f'<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE w:document [<!ENTITY big "{payload}">]>'
           f'<w:document xmlns:w="{W_NS}"><w:body><w:p>{body}</w:p></w:body></w:document>')  # fmt: skip
    return docx_with(Entry.deflated("word/document.xml", xml.encode("utf-16")))


def big_png(width: int = 6000, height: int = 6000) -> bytes:
    """A real, black PNG of ``width`` x ``height`` (36 Mpx by default: under the pixel cap, so it is
    decoded) in about 0.5 MB: decoding it needs more memory than a small reader process has."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    row = b"\0" * (1 + 3 * width)  # filter byte "none", then RGB
    c = zlib.compressobj(1)
    idat = b"".join(c.compress(row * 100) for _ in range(height // 100)) + c.compress(row * (height % 100))
    idat += c.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
