"""Webhook bodies that arrive in more than one TCP segment (issue 12, item 7).

Senders and proxies split a request wherever they like. A correctly signed body written in two
pieces, with a pause between them, must be read whole and produce a turn; a body over the cap is
still refused, also when it comes without a Content-Length and never ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.rig import ADA_NC, ADA_ROOM, ADA_TG, TG_WEBHOOK_SECRET, Rig, start_rig

TG_HEADER = "X-Telegram-Bot-Api-Secret-Token"
NC_CAP = 4096  # the smallest cap the config allows: the endless body needs only a little traffic


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    rig = await start_rig(tmp_path, telegram={"mode": "webhook", "webhook_secret": TG_WEBHOOK_SECRET},
                          nextcloud={"max_body_bytes": NC_CAP})
    yield rig
    await rig.stop()


def _head(rig: Rig, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{rig.gw.port}", "Connection: close",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _status(reader: asyncio.StreamReader) -> int:
    line = await asyncio.wait_for(reader.readline(), 10)
    return int(line.split()[1])


async def post_in_pieces(rig: Rig, path: str, headers: dict[str, str], body: bytes, pause_s: float = 0.3) -> int:
    """POST ``body`` with the headers and the first half in one write, the rest ``pause_s`` later."""
    assert rig.gw.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.gw.port)
    try:
        half = len(body) // 2
        writer.write(_head(rig, path, {**headers, "Content-Length": str(len(body))}) + body[:half])
        await writer.drain()
        await asyncio.sleep(pause_s)  # the server has read the first piece and is waiting
        writer.write(body[half:])
        await writer.drain()
        return await _status(reader)
    finally:
        writer.close()


async def post_endless(rig: Rig, path: str, headers: dict[str, str], *, limit: int) -> tuple[int, int]:
    """Send a chunked body that never ends; returns (status, bytes sent before the answer came)."""
    assert rig.gw.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.gw.port)
    piece = b"x" * 1024
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    sent = 0
    try:
        writer.write(_head(rig, path, {**headers, "Transfer-Encoding": "chunked"}) + b'6\r\n{"a":"\r\n')
        status_line = asyncio.ensure_future(reader.readline())
        while not status_line.done():
            if sent > limit:
                status_line.cancel()
                raise AssertionError(f"no answer after {sent} bytes of body")
            writer.write(chunk)
            sent += len(piece)
            try:
                await writer.drain()
            except ConnectionError:
                break  # the server answered and closed: the answer is in the reader's buffer
            await asyncio.sleep(0.002)
        line = await asyncio.wait_for(status_line, 10)
        return int(line.split()[1]), sent
    finally:
        writer.close()


async def test_signed_nextcloud_body_in_two_writes_makes_a_turn(rig: Rig) -> None:
    body = json.dumps(rig.nc.payload(room=ADA_ROOM, user=ADA_NC, text="split across two segments")).encode()
    status = await post_in_pieces(rig, "/nextcloud/webhook", rig.nc.signed_headers(body), body)
    assert status == 200
    posts = await rig.nc.wait_posts(1)
    assert "split across two segments" in posts[0].message
    assert rig.turns("nextcloud") == 1


async def test_telegram_update_in_two_writes_makes_a_turn(rig: Rig) -> None:
    body = json.dumps(rig.tg.make_update(user_id=ADA_TG, text="split across two segments")).encode()
    headers = {"Content-Type": "application/json", TG_HEADER: TG_WEBHOOK_SECRET}
    status = await post_in_pieces(rig, "/telegram/webhook", headers, body)
    assert status == 200
    sent = await rig.tg.wait_sent(1)
    assert "split across two segments" in sent[0].text
    assert rig.turns("telegram") == 1


async def test_many_small_writes_still_make_one_body(rig: Rig) -> None:
    """A body trickled in byte by byte is still one body (the read loops until EOF)."""
    body = json.dumps(rig.nc.payload(room=ADA_ROOM, user=ADA_NC, text="trickled")).encode()
    assert rig.gw.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.gw.port)
    head = _head(rig, "/nextcloud/webhook", {**rig.nc.signed_headers(body), "Content-Length": str(len(body))})
    writer.write(head)
    for i in range(0, len(body), 16):
        writer.write(body[i : i + 16])
        await writer.drain()
        await asyncio.sleep(0.001)
    assert await _status(reader) == 200
    writer.close()
    await rig.nc.wait_posts(1)


async def test_oversized_bodies_are_refused_without_reading_them_all(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # Declared too large: refused from the header, before any of the body is read.
    big = b"x" * (NC_CAP + 1)
    status = await post_in_pieces(rig, "/nextcloud/webhook", rig.nc.signed_headers(big), big, pause_s=0.05)
    assert status == 413
    # No Content-Length and no end: the answer comes after about the cap, not after the sender stops.
    status, sent = await post_endless(rig, "/nextcloud/webhook", rig.nc.signed_headers(b"{}"), limit=64 * NC_CAP)
    assert status == 413, sent
    tg_headers = {"Content-Type": "application/json", TG_HEADER: TG_WEBHOOK_SECRET}
    status, sent = await post_endless(rig, "/telegram/webhook", tg_headers, limit=16 * 256 * 1024)
    assert status == 400, sent  # Telegram's webhook answers 400 for every refused payload
    assert "body too large" in caplog.text
    nc = rig.gw.adapters["nextcloud"]
    assert nc.stats["rejected_payload"] == 2 and nc.stats["rejected_signature"] == 0  # type: ignore[attr-defined]
    assert rig.turns() == 0
    # and the real thing still works
    assert await rig.nc_say("after the flood") == 200
    await rig.nc.wait_posts(1)
