"""``kith chat``: a terminal client for the WebSocket gateway (docs/protocol.md).

``kith chat`` is interactive: replies stream and are rendered as Markdown (rich), command answers and
notices are shown as they are, the prompt shows Off-The-Record and a status line the session, and
the arrow keys recall earlier lines (readline; kept in ``$XDG_STATE_HOME/kith/chat_history``, never
the lines typed Off-The-Record). Ctrl-C while a reply comes stops it (what came stays, marked); at
the prompt Ctrl-C or Ctrl-D leaves, as does a second Ctrl-C. ``kith chat --message TEXT`` sends one
message, prints the reply and exits (0 on a reply, 1 on an error frame, 2 when it cannot connect).

The input loop runs in the main thread (so Ctrl-C interrupts it cleanly); the connection runs on an
event loop in a second thread, which also prints what arrives unasked (state changes, reminders).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from gateway.cli.chat_interrupt import NUDGE
from gateway.cli.chat_view import View
from gateway.cli.common import load_or_exit

T = TypeVar("T")
SHOWN_IDS = 500  # delivery ids remembered to drop a proactive message sent again


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("chat", help="chat with the running daemon from the terminal")
    p.add_argument("--url", help="WebSocket URL (default: from config server.host/port)")
    p.add_argument("--token", default=os.environ.get("KITH_TOKEN"), help="access token (default $KITH_TOKEN)")
    p.add_argument("--client-id", default=os.environ.get("KITH_CLIENT_ID"), help="account id of this terminal")
    p.add_argument("--name", default=os.environ.get("USER", ""), help="display name")
    p.add_argument("-m", "--message", help="send one message, print the reply, exit")
    p.set_defaults(func=run)


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "kith"


def state_home() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "kith"


def _client_id(args: argparse.Namespace) -> str:
    if args.client_id:
        return str(args.client_id)
    path = _config_home() / "client-id"
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
    """One connection. A reader task sorts frames: those about the message being answered go to
    ``ask``; state changes and proactive messages go to the view at once."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, view: View | None = None) -> None:
        self.ws = ws
        self.view = view
        self.seq = 0
        self.state: dict[str, Any] = {}
        self._answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self.closed = False
        # delivery ids of the proactive messages shown (docs/protocol.md, acknowledging): one sent
        # again (its ack was lost with a killed daemon) is acknowledged and not shown twice
        self.shown: OrderedDict[str, None] = OrderedDict()

    async def recv(self) -> dict[str, Any]:
        msg = await self.ws.receive()
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise ConnectionError(f"connection closed ({self.ws.close_code})")
        return json.loads(msg.data)  # type: ignore[no-any-return]

    async def hello(self, client_id: str, name: str) -> dict[str, Any]:
        await self.ws.send_json({"type": "hello", "client_id": client_id, "name": name, "acks": True})
        ready = await self.recv()
        if ready.get("type") == "ready":
            self.state = {k: ready.get(k) for k in ("session_id", "otr", "persona", "tier", "display_name")}
            self._reader = asyncio.create_task(self._read())
        return ready

    async def _read(self) -> None:
        try:
            while True:
                frame = await self.recv()
                if frame.get("type") == "state":
                    changed = {k: v for k, v in frame.items() if k != "type"}
                    if self.view is not None:
                        self.view.state_changed(self.state, changed)
                    self.state.update(changed)
                elif frame.get("type") == "reply" and frame.get("proactive"):
                    # Acknowledged once shown: ``--message`` shows none, so they wait for a client that does.
                    if self.view is not None:
                        if self._first_time(frame.get("delivery_id")):
                            self.view.proactive(frame.get("text", ""), notice=bool(frame.get("notice")))
                        if isinstance(frame.get("delivery_id"), str):
                            await self.ws.send_json({"type": "ack", "delivery_id": frame["delivery_id"]})
                else:
                    await self._answers.put(frame)
        except (ConnectionError, aiohttp.ClientError) as exc:
            if self.view is not None and not self.closed:
                self.view.disconnected()  # at once, not only when the next line is sent
            self.closed = True
            await self._answers.put({"type": "closed", "message": str(exc)})

    def _first_time(self, delivery_id: Any) -> bool:
        if not isinstance(delivery_id, str):
            return True
        if delivery_id in self.shown:
            return False
        self.shown[delivery_id] = None
        while len(self.shown) > SHOWN_IDS:
            self.shown.popitem(last=False)
        return True

    async def cancel(self) -> None:
        """Stop the reply being written (docs/protocol.md#working-and-stopping-a-reply)."""
        if not self.closed:
            with contextlib.suppress(ConnectionError, aiohttp.ClientError):
                await self.ws.send_json({"type": "cancel"})

    async def ask(self, text: str, *, stream: bool) -> tuple[bool, str]:
        """Send ``text``; (True, reply text) or (False, an error line). Streams to the view if asked."""
        if self.closed:
            raise ConnectionError("the connection closed")
        self.seq += 1
        ref = f"{self.seq}-{uuid.uuid4().hex[:6]}"
        await self.ws.send_json({"type": "message", "id": ref, "text": text})
        view = self.view if stream else None
        streamed = False
        try:
            while True:
                frame = await self._answers.get()
                kind = frame.get("type")
                if kind == "closed":
                    raise ConnectionError(frame.get("message", "connection closed"))
                if frame.get("id") != ref and not (kind == "error" and frame.get("id") is None):
                    continue  # an answer to an earlier message nobody waits for any more
                if kind == "delta" and view is not None and frame.get("text"):
                    view.delta(frame["text"])
                    streamed = True
                elif kind == "reply":
                    if frame.get("session_id") is not None and "otr" in frame:
                        self.state["otr"] = bool(frame["otr"])
                    if view is not None:
                        view.reply(frame.get("text", ""), notice=bool(frame.get("notice")),
                                   dropped=bool(frame.get("dropped")))  # fmt: skip
                        streamed = False
                    return True, frame.get("text", "")
                elif kind == "error":
                    return False, f"error: {frame.get('message')}"
        finally:
            if streamed and view is not None:
                view.abandon()


async def _connect(args: argparse.Namespace, url: str, http: aiohttp.ClientSession,
                   view: View | None) -> tuple[Client, dict[str, Any]]:  # fmt: skip
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    ws = await http.ws_connect(url, headers=headers)
    client = Client(ws, view)
    ready = await client.hello(_client_id(args), args.name)
    return client, ready


async def one_message(args: argparse.Namespace, url: str) -> int:
    try:
        async with aiohttp.ClientSession() as http:
            client, ready = await _connect(args, url, http, None)
            if ready.get("type") != "ready":
                print(f"error: {ready.get('message', ready)}", file=sys.stderr)
                return 1
            ok, text = await client.ask(args.message, stream=False)
            print(text)
            await client.ws.close()
            return 0 if ok else 1
    except (aiohttp.ClientError, ConnectionError, OSError) as exc:
        print(f"cannot talk to kith at {url}: {exc}", file=sys.stderr)
        return 2


class Loop:
    """An event loop in a daemon thread; the main thread hands it coroutines and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="kith-chat-net", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def run_stoppable(self, coro: Coroutine[Any, Any, T], stop: Callable[[], Coroutine[Any, Any, None]]) -> T:
        """Like ``run``, but the first Ctrl-C runs ``stop`` and keeps waiting (the reply ends with what
        came); a second one leaves."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            asyncio.run_coroutine_threadsafe(stop(), self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=2)


def interactive(args: argparse.Namespace, url: str) -> int:
    view = View(history_file=state_home() / "chat_history")
    net = Loop()
    http: aiohttp.ClientSession | None = None
    client: Client | None = None
    try:
        http = net.run(_make_session())
        client, ready = net.run(_connect(args, url, http, view))
        if ready.get("type") != "ready":
            view.error(f"error: {ready.get('message', ready)}")
            return 1
        view.welcome(ready)
        while True:
            line = view.read_line(otr=bool(client.state.get("otr")))
            if line is None:
                return 0
            if not line.strip():
                continue
            if not client.state.get("otr"):  # as it is now: another client may have switched it
                view.keep(line)
            ok, text = net.run_stoppable(client.ask(line, stream=True), client.cancel)
            if not ok:
                view.error(text)
    except KeyboardInterrupt:
        view.bye()
        return 0
    except (aiohttp.ClientError, ConnectionError, OSError) as exc:
        view.error(f"cannot talk to kith at {url}: {exc}")
        return 2
    finally:
        with contextlib.suppress(BaseException):
            if client is not None:
                client.closed = True  # we are leaving: the reader is not to announce it
                net.run(client.ws.close())
            if http is not None:
                net.run(http.close())
        net.close()


async def _make_session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession()


def run(args: argparse.Namespace) -> int:
    url = args.url
    if not url:
        cfg = load_or_exit(args)
        host = "127.0.0.1" if cfg.server.host in ("0.0.0.0", "::", "") else cfg.server.host
        url = f"ws://{host}:{cfg.server.port}/ws"
        if args.token is None and cfg.server.token is not None:
            args.token = cfg.server.token.get_secret_value()
    if args.message is not None:
        return asyncio.run(one_message(args, url))
    # An interactive client always answers Ctrl-C, whatever its parent set: a shell's background job,
    # nohup or a CI runner starts it with SIGINT ignored, and an ignored signal is inherited across
    # exec, so Ctrl-C at the prompt or during a reply did nothing at all.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    NUDGE.install()  # and one that lands just as the prompt is drawn is not lost (chat_interrupt.py)
    return interactive(args, url)
