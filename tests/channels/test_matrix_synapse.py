"""The Matrix adapter against a real homeserver: Synapse, started by the test (marker ``synapse``).

Synapse is not one of kith's dependencies (it would bring Twisted and half a server into the lock): it
is installed into a virtualenv of its own and named with ``KITH_SYNAPSE_PYTHON`` (docs/channels.md,
"Against a real Synapse"); without it the test is skipped. The test writes a homeserver config in
its temporary directory (SQLite, one plain-HTTP listener on loopback, a registration shared secret),
registers the bot and Ada through the shared-secret admin API, and runs the adapter through mautrix:
Ada opens a direct chat with the bot, the bot joins, her message is a turn and the answer reaches her.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

pytest.importorskip("mautrix")

from adapters.matrix import MatrixAdapter
from gateway.types import ConversationKind
from tests.channels.stub import StubGateway

pytestmark = pytest.mark.synapse
SYNAPSE_PYTHON = os.environ.get("KITH_SYNAPSE_PYTHON", "")
INSTALLED = bool(SYNAPSE_PYTHON) and Path(SYNAPSE_PYTHON).exists()
SERVER = "kith.test"
SECRET = "synapse-shared-secret-0123456789"
START_S = 180.0  # Synapse's first start creates its database: a minute on a busy two-core machine


@dataclass
class Synapse:
    base_url: str
    process: subprocess.Popen[bytes]
    log: Path

    async def register(self, http: aiohttp.ClientSession, user: str, password: str) -> dict[str, Any]:
        """A user made through the shared-secret admin API (``/_synapse/admin/v1/register``)."""
        url = f"{self.base_url}/_synapse/admin/v1/register"
        async with http.get(url) as resp:
            nonce = (await resp.json())["nonce"]
        mac = hmac.new(SECRET.encode(), b"\0".join([nonce.encode(), user.encode(), password.encode(), b"notadmin"]),
                       hashlib.sha1).hexdigest()  # fmt: skip
        body = {"nonce": nonce, "username": user, "password": password, "admin": False, "mac": mac}
        async with http.post(url, json=body) as resp:
            assert resp.status == 200, await resp.text()
            return dict(await resp.json())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(home: Path) -> Synapse:
    """Write a homeserver config in ``home`` and start Synapse on a free loopback port (blocking)."""
    config = home / "homeserver.yaml"
    subprocess.run([SYNAPSE_PYTHON, "-m", "synapse.app.homeserver", "--server-name", SERVER, "--config-path",
                    str(config), "--data-directory", str(home), "--generate-config", "--report-stats=no"],
                   check=True, capture_output=True, cwd=home, timeout=120)  # fmt: skip
    port = _free_port()
    data = yaml.safe_load(config.read_text())
    loose = {"per_second": 1000, "burst_count": 1000}
    data.update({
        "listeners": [{"port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                       "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
        "database": {"name": "sqlite3", "args": {"database": str(home / "homeserver.db")}},
        "registration_shared_secret": SECRET, "enable_registration": False, "trusted_key_servers": [],
        "suppress_key_server_warning": True, "report_stats": False, "presence": {"enabled": False},
        "rc_message": loose, "rc_joins": {"local": loose, "remote": loose}, "rc_invites": {"per_room": loose,
        "per_user": loose, "per_issuer": loose}, "rc_login": {"address": loose, "account": loose,
        "failed_attempts": loose},
    })  # fmt: skip
    config.write_text(yaml.safe_dump(data))
    log = home / "stdout.log"
    with log.open("wb") as out:
        process = subprocess.Popen([SYNAPSE_PYTHON, "-m", "synapse.app.homeserver", "--config-path", str(config)],
                                   cwd=home, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    return Synapse(base_url=f"http://127.0.0.1:{port}", process=process, log=log)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@pytest.fixture
async def synapse(tmp_path: Path) -> AsyncIterator[Synapse]:
    if not INSTALLED:
        pytest.skip("no Synapse: install matrix-synapse into a venv of its own and set KITH_SYNAPSE_PYTHON "
                    "(docs/channels.md)")  # fmt: skip
    home = tmp_path / "synapse"
    home.mkdir()
    server = await asyncio.to_thread(_start, home)
    try:
        deadline = time.monotonic() + START_S
        async with aiohttp.ClientSession() as http:
            while True:
                if server.process.poll() is not None:
                    raise AssertionError(f"Synapse exited: {server.log.read_text()[-3000:]}")
                try:
                    async with http.get(f"{server.base_url}/_matrix/client/versions") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert time.monotonic() < deadline, f"Synapse did not answer in {START_S:g} s"
                await asyncio.sleep(0.25)
        yield server
    finally:
        await asyncio.to_thread(_stop, server.process)


async def _poll(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.2)


async def test_a_direct_chat_round_trip_with_synapse(synapse: Synapse, tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as http:
        bot = await synapse.register(http, "kith", "bot-password-0123")
        ada = await synapse.register(http, "ada", "ada-password-0123")
        ada_auth = {"Authorization": f"Bearer {ada['access_token']}"}
        section = {"enabled": True, "homeserver": synapse.base_url, "access_token": bot["access_token"],
                   "sync_timeout_s": 1, "allow_from": [ada["user_id"]], "dm_policy": "allowlist"}  # fmt: skip
        async with StubGateway.with_channels(tmp_path / "kith", matrix=section) as gw:
            adapter = MatrixAdapter(gw)  # type: ignore[arg-type]
            gw.start(adapter)
            await asyncio.wait_for(adapter.ready.wait(), 60)
            room_body = {"is_direct": True, "invite": [bot["user_id"]], "preset": "trusted_private_chat"}
            async with http.post(f"{synapse.base_url}/_matrix/client/v3/createRoom", json=room_body,
                                 headers=ada_auth) as resp:  # fmt: skip
                assert resp.status == 200, await resp.text()
                room = (await resp.json())["room_id"]
            members = f"{synapse.base_url}/_matrix/client/v3/rooms/{room}/joined_members"

            async def bot_joined() -> bool:
                async with http.get(members, headers=ada_auth) as resp:
                    return bot["user_id"] in (await resp.json()).get("joined", {})

            await _poll("the bot joined the direct chat", bot_joined)
            send = f"{synapse.base_url}/_matrix/client/v3/rooms/{room}/send/m.room.message/t1"
            async with http.put(send, json={"msgtype": "m.text", "body": "hello from a real homeserver"},
                                headers=ada_auth) as resp:  # fmt: skip
                assert resp.status == 200, await resp.text()
            (msg,) = await gw.wait_inbound(1, timeout=60)
            assert (msg.channel, msg.account_id, msg.conversation_id) == ("matrix", ada["user_id"], room)
            assert msg.kind is ConversationKind.DM and msg.text == "hello from a real homeserver"
            messages = f"{synapse.base_url}/_matrix/client/v3/rooms/{room}/messages?dir=b&limit=20"

            async def answered() -> list[str]:
                async with http.get(messages, headers=ada_auth) as resp:
                    chunk = (await resp.json()).get("chunk", [])
                return [e["content"].get("body", "") for e in chunk
                        if e.get("type") == "m.room.message" and e.get("sender") == bot["user_id"]]

            said = await _poll("the bot's answer in the room", answered)
            assert said == ["echo: hello from a real homeserver"]
