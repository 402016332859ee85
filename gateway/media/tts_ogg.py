"""Ogg/Opus read just far enough to trust it: its pages walked, its first packet an ``OpusHead``, and its
duration from the last page's granule position (RFC 7845: 48 kHz samples, less the header's pre-skip).

Telegram's ``sendVoice`` plays Ogg/Opus as a voice note and shows the ``duration`` it is given; what a
speech server sends back is checked here before it is sent on, so a server answering MP3 or an error
page in place of audio costs a log line, not a broken voice note. Pure Python and bounded by the data's
length: one pass over page headers, no decoding.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = b"OggS"
_HEADER = struct.Struct("<4sBBqIIIB")  # capture, version, flags, granule, serial, sequence, CRC, segments
OPUS_RATE = 48_000  # an Opus granule position counts 48 kHz samples whatever the input rate was


class NotOggOpus(ValueError):
    """The bytes are not an Ogg stream whose first logical stream is Opus."""


@dataclass(frozen=True, slots=True)
class OggOpus:
    duration_s: float
    channels: int
    pages: int


def read_ogg_opus(data: bytes) -> OggOpus:
    """The stream's duration, channel count and page count; ``NotOggOpus`` if it is not Ogg/Opus or
    is cut short (a page longer than what is left)."""
    if not data.startswith(MAGIC):
        raise NotOggOpus("not an Ogg stream")
    pos, pages, serial, granule, head = 0, 0, None, -1, b""
    while pos < len(data):
        if len(data) - pos < _HEADER.size:
            raise NotOggOpus(f"a page header cut short at byte {pos}")
        magic, version, _, page_granule, page_serial, _, _, count = _HEADER.unpack_from(data, pos)
        if magic != MAGIC or version != 0:
            raise NotOggOpus(f"no Ogg page at byte {pos}")
        table = data[pos + _HEADER.size: pos + _HEADER.size + count]
        body_at = pos + _HEADER.size + count
        end = body_at + sum(table)
        if len(table) < count or end > len(data):
            raise NotOggOpus(f"the page at byte {pos} is cut short")
        if serial is None:
            serial = page_serial
            head = data[body_at:end]
        if page_serial == serial and page_granule >= 0:  # -1: no packet ends on this page
            granule = max(granule, page_granule)
        pos, pages = end, pages + 1
    if not head.startswith(b"OpusHead") or len(head) < 19:
        raise NotOggOpus("its first packet is not an OpusHead (not Opus)")
    channels, pre_skip = head[9], struct.unpack_from("<H", head, 10)[0]
    samples = max(0, granule - pre_skip)
    return OggOpus(duration_s=samples / OPUS_RATE, channels=channels, pages=pages)
