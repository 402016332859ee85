"""Shared by the media tests: files made in the test (images, PDFs), a signed-in browser that
uploads through ``POST /api/uploads`` and sends the message over the web chat's WebSocket."""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from PIL import Image
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from gateway.app import Gateway
from tests.signin.rig import browser, person, sign_in, url


def png(width: int = 64, height: int = 48, colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, format="PNG")
    return out.getvalue()


def pdf(pages: list[str], *, password: str = "") -> bytes:
    """A real PDF whose pages carry ``pages`` as text (Helvetica), optionally encrypted."""
    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(width=612, height=792)
        font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                                 NameObject("/BaseFont"): NameObject("/Helvetica")})  # fmt: skip
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
            {NameObject("/F1"): writer._add_object(font)})})  # fmt: skip
        stream = DecodedStreamObject()
        safe = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({safe}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    if password:
        writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def media_files(data_dir: Path, user_id: str) -> list[str]:
    """Every file under the person's media folder (relative to their root)."""
    root = data_dir / "users" / user_id
    media = root / "media"
    return sorted(str(p.relative_to(root)) for p in media.rglob("*") if p.is_file()) if media.exists() else []


@dataclass
class Browser:
    gw: Gateway
    http: aiohttp.ClientSession
    csrf: str
    user_id: str
    ws: aiohttp.ClientWebSocketResponse | None = None
    passed: list[dict[str, Any]] = field(default_factory=list)  # frames ``send`` read past, in order

    async def upload(self, data: bytes, name: str, content_type: str) -> tuple[int, dict[str, Any]]:
        headers = {"Content-Type": content_type, "X-Filename": quote(name), "X-CSRF-Token": self.csrf}
        async with self.http.post(url(self.gw, "/api/uploads"), data=data, headers=headers) as resp:
            return resp.status, await resp.json(content_type=None)

    async def connect(self) -> None:
        self.ws = await self.http.ws_connect(url(self.gw, "/ws"))
        await self.ws.send_json({"type": "hello", "client_id": "web-" + uuid.uuid4().hex[:8], "name": "Alice"})
        ready = await self.recv()
        assert ready["type"] == "ready", ready

    async def recv(self) -> dict[str, Any]:
        assert self.ws is not None
        msg = await self.ws.receive(timeout=30)
        assert msg.type == aiohttp.WSMsgType.TEXT, msg
        return json.loads(msg.data)  # type: ignore[no-any-return]

    async def send(self, text: str, attachments: list[str]) -> dict[str, Any]:
        """Send a message frame; the reply (or error) frame that answers it."""
        assert self.ws is not None
        ref = uuid.uuid4().hex[:10]
        await self.ws.send_json({"type": "message", "id": ref, "text": text, "attachments": attachments})
        while True:
            frame = await self.recv()
            if frame.get("id") == ref and frame["type"] in ("reply", "error"):
                return frame
            self.passed.append(frame)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        await self.http.close()


async def signed_in_browser(gw: Gateway, account: str = "alice-phone") -> Browser:
    uid = await person(gw, account)
    http = browser()
    csrf = await sign_in(gw, http, uid)
    b = Browser(gw, http, csrf, uid)
    await b.connect()
    return b
