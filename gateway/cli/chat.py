"""``kith chat``: a terminal client for the WebSocket gateway.

``kith chat`` is interactive (streamed replies); ``kith chat --message TEXT`` sends one message,
prints the reply and exits (0 on a reply, 1 on an error frame, 2 when it cannot connect).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from gateway.cli.common import load_or_exit


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("chat", help="chat with the running daemon from the terminal")
    p.add_argument("--url", help="WebSocket URL (default: from config server.host/port)")
    p.add_argument("--token", default=os.environ.get("KITH_TOKEN"), help="access token (default $KITH_TOKEN)")
    p.add_argument("--client-id", default=os.environ.get("KITH_CLIENT_ID"), help="account id of this terminal")
    p.add_argument("--name", default=os.environ.get("USER", ""), help="display name")
    p.add_argument("-m", "--message", help="send one message, print the reply, exit")
    p.set_defaults(func=run)


def _client_id(args: argparse.Namespace) -> str:
    if args.client_id:
        return str(args.client_id)
    path = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "kith" / "client-id"
    try:
        return path.read_text().strip()
    except OSError:
        cid = "term-" + uuid.uuid4().hex[:12]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(cid)
        except OSError:
            pass
        return cid


class Client:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.seq = 0

    async def recv(self) -> dict[str, Any]:
        msg = await self.ws.receive()
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise ConnectionError(f"connection closed ({self.ws.close_code})")
        return json.loads(msg.data)  # type: ignore[no-any-return]

    async def ask(self, text: str, *, stream: bool) -> tuple[bool, str]:
        self.seq += 1
        ref = f"{self.seq}-{uuid.uuid4().hex[:6]}"
        await self.ws.send_json({"type": "message", "id": ref, "text": text})
        streamed = False
        while True:
            frame = await self.recv()
            if frame.get("id") not in (ref, None):
                continue
            if frame["type"] == "delta" and stream:
                print(frame["text"], end="", flush=True)
                streamed = True
            elif frame["type"] == "reply":
                if stream and streamed:
                    print()
                    return True, frame["text"]
                return True, frame["text"]
            elif frame["type"] == "error":
                return False, f"error: {frame.get('message')}"


async def session(args: argparse.Namespace, url: str) -> int:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        async with aiohttp.ClientSession() as http, http.ws_connect(url, headers=headers) as ws:
            client = Client(ws)
            await ws.send_json({"type": "hello", "client_id": _client_id(args), "name": args.name})
            ready = await client.recv()
            if ready.get("type") != "ready":
                print(f"error: {ready.get('message', ready)}", file=sys.stderr)
                return 1
            if args.message is not None:
                ok, text = await client.ask(args.message, stream=False)
                print(text)
                return 0 if ok else 1
            if ready.get("notice"):
                print(f"[{ready['notice']}]")
            print("kith chat: type a message, /help for commands, Ctrl-D to quit.")
            loop = asyncio.get_running_loop()
            while True:
                line = await loop.run_in_executor(None, _prompt)
                if line is None:
                    return 0
                if not line.strip():
                    continue
                ok, text = await client.ask(line, stream=True)
                if not ok:
                    print(text)
    except (aiohttp.ClientError, ConnectionError, OSError) as exc:
        print(f"cannot talk to kith at {url}: {exc}", file=sys.stderr)
        return 2


def _prompt() -> str | None:
    try:
        return input("> ")
    except EOFError:
        return None


def run(args: argparse.Namespace) -> int:
    url = args.url
    if not url:
        cfg = load_or_exit(args)
        host = "127.0.0.1" if cfg.server.host in ("0.0.0.0", "::", "") else cfg.server.host
        url = f"ws://{host}:{cfg.server.port}/ws"
        if args.token is None and cfg.server.token is not None:
            args.token = cfg.server.token.get_secret_value()
    return asyncio.run(session(args, url))
