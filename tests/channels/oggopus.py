"""A small, valid Ogg/Opus stream made at test time (RFC 7845 framing, RFC 3533 pages with their CRC),
so the fake speech server answers what a real one does without a codec library or a binary fixture.
The audio is silence: 20 ms CELT frames of the well-known three-byte silent packet."""

from __future__ import annotations

import struct

SILENT_FRAME = b"\xf8\xff\xfe"  # TOC 0xf8: CELT-only fullband 20 ms, mono, one frame; then silence
FRAME_SAMPLES = 960  # 20 ms at the 48 kHz every Opus granule position counts in
PRE_SKIP = 312  # what libopus encoders put in OpusHead


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return table


_TABLE = _crc_table()


def ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _TABLE[((crc >> 24) & 0xFF) ^ byte]
    return crc


def page(packets: list[bytes], *, granule: int, serial: int, sequence: int, flags: int = 0) -> bytes:
    """One Ogg page holding whole packets (each under 255 * 255 bytes, as here)."""
    table = bytearray()
    for packet in packets:
        table += b"\xff" * (len(packet) // 255) + bytes([len(packet) % 255])
    header = struct.pack("<4sBBqIIIB", b"OggS", 0, flags, granule, serial, sequence, 0, len(table)) + bytes(table)
    body = b"".join(packets)
    crc = ogg_crc(header + body)
    return header[:22] + struct.pack("<I", crc) + header[26:] + body


def ogg_opus(seconds: float = 1.0, *, serial: int = 0x6B697468) -> bytes:
    """``seconds`` of mono silence as Ogg/Opus: OpusHead, OpusTags, then audio pages of 50 frames."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, PRE_SKIP, 48_000, 0, 0)
    tags = b"OpusTags" + struct.pack("<I", 4) + b"kith" + struct.pack("<I", 0)
    out = [page([head], granule=0, serial=serial, sequence=0, flags=0x02),
           page([tags], granule=0, serial=serial, sequence=1)]
    frames = max(1, round(seconds * 48_000 / FRAME_SAMPLES))
    done, sequence = 0, 2
    while done < frames:
        n = min(50, frames - done)
        done += n
        last = done == frames
        out.append(page([SILENT_FRAME] * n, granule=PRE_SKIP + done * FRAME_SAMPLES, serial=serial,
                        sequence=sequence, flags=0x04 if last else 0))
        sequence += 1
    return b"".join(out)
