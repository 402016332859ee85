"""A real IMAP server: pymap with its in-memory (dict) backend, on a free loopback port in the test's
own event loop. kith's adapter talks to it through the real aioimaplib client, as to any server:
LOGIN, SELECT (UIDVALIDITY, UIDNEXT), UID SEARCH, UID FETCH, UID STORE, IDLE with EXISTS pushes.

Mail arrives the way a delivery agent puts it there: ``deliver`` APPENDs it to the mailbox over IMAP.
Passwords are kept in clear (``Cleartext``): pymap's default hash costs ~0.4 s per login.
With ``tls`` (a certificate and its key), it offers STARTTLS and refuses a login before TLS
(``LOGINDISABLED``), as a server on port 143 should; with ``implicit_tls`` (a server context) it speaks
TLS from the first byte, as on port 993.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Any, Self

import aioimaplib
from proxyprotocol.reader import ProxyProtocolReader
from pymap.backend.dict import DictBackend
from pymap.imap import IMAPServer
from pymap.user import Passwords, UserMetadata
from pysasl.hashing import Cleartext

USER = "kith@example.org"
PASSWORD = "imap-password-0123"


@dataclass
class FakeIMAP:
    user: str = USER
    password: str = PASSWORD
    idle: bool = True
    tls: tuple[str, str] | None = None  # (certificate chain, key) PEM files: STARTTLS, and no login without it
    port: int = 0
    connections: int = 0
    _server: asyncio.Server | None = None
    _backend: Any = None
    _config: Any = None
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)
    _client: Any = None
    implicit_tls: ssl.SSLContext | None = None  # implicit TLS (imaps://) with this server context

    async def start(self) -> Self:
        cert, key = self.tls or (None, None)
        args = Namespace(host="127.0.0.1", port=0, debug=False, cert=cert, key=key, tls=self.tls is not None,
                         passlib_cfg=None,
                         demo_data=False, demo_user=self.user, demo_password=self.password, inherited_sockets=None,
                         proxy_protocol=None)  # fmt: skip
        self._backend, self._config = await DictBackend.init(
            args, hash_context=Cleartext(), secure_auth=False, reject_dnsbl=False, invalid_user_sleep=0.0,
            disable_idle=not self.idle)  # fmt: skip
        self._config.apply_context()
        callback = ProxyProtocolReader(self._config.proxy_protocol).get_callback(
            IMAPServer(self._backend.login, self._config))

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            self._writers.append(writer)
            await callback(reader, writer)

        self._server = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=self.implicit_tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._client is not None:
            self._client.protocol.transport.close()
        self.drop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def drop(self) -> None:
        """Close every connection, as a restarting server does."""
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        self._client = None

    async def set_password(self, password: str) -> None:
        hashed = await Passwords(self._config).hash_password(password)
        await self._backend.login.demo_user_identity.set(UserMetadata(self._config, self.user, password=hashed))
        self.password = password

    async def _admin(self) -> Any:
        if self._client is None:
            if self.implicit_tls is None:
                client = aioimaplib.IMAP4(host="127.0.0.1", port=self.port, timeout=10)
            else:  # the test's own side door: no name to check on 127.0.0.1
                trust = ssl.create_default_context()
                trust.check_hostname, trust.verify_mode = False, ssl.CERT_NONE
                client = aioimaplib.IMAP4_SSL(host="127.0.0.1", port=self.port, timeout=10, ssl_context=trust)
            await client.wait_hello_from_server()
            if self.tls is not None:
                await _start_tls(client)
            assert (await client.login(self.user, self.password)).result == "OK"
            self._client = client
        return self._client

    async def deliver(self, raw: bytes, mailbox: str = "INBOX", flags: str | None = None) -> int:
        """Put a mail into ``mailbox`` (``flags``: "(\\Seen)" for one already read); its UID."""
        client = await self._admin()
        resp = await client.append(raw, mailbox=mailbox, flags=flags)
        assert resp.result == "OK", resp
        found = re.search(rb"APPENDUID \d+ (\d+)", b" ".join(bytes(x) for x in resp.lines))
        assert found, resp
        return int(found.group(1))

    async def flags(self, uid: int, mailbox: str = "INBOX") -> str:
        client = await self._admin()
        await client.select(mailbox)
        resp = await client.uid("fetch", str(uid), "(FLAGS)")
        return b" ".join(bytes(x) for x in resp.lines if isinstance(x, bytes | bytearray)).decode()


async def _start_tls(client: Any) -> None:
    """STARTTLS for the delivering client (the server's own side: it need not check the certificate)."""
    protocol = client.protocol
    answer = await protocol.execute(aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop))
    assert answer.result == "OK", answer
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    protocol.transport = await asyncio.get_running_loop().start_tls(protocol.transport, protocol, context)
    await protocol.capability()
