"""A real SMTP server (aiosmtpd) on a free loopback port, in the test's own event loop: it takes
what kith sends and keeps each mail as parsed bytes, so a test reads the headers kith wrote.

``password`` turns on ``AUTH PLAIN`` (over plain text: loopback only); ``fail_next`` answers
the next mails ``451`` (a temporary failure kith must retry); ``hold`` (an event) keeps each mail's
DATA unanswered until it is set, as a server slow to accept a mail does (``holding`` counts them).
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import ssl
import warnings
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Self

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.fakes.serve import arrived


@dataclass
class Delivered:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage


@dataclass
class FakeSMTP:
    user: str = ""
    password: str = ""
    fail_next: int = 0
    received: list[Delivered] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    tls: ssl.SSLContext | None = None  # implicit TLS (smtps://) with this server context
    starttls: ssl.SSLContext | None = None  # STARTTLS offered (and required before anything else) with this one
    hold: asyncio.Event | None = None
    holding: int = 0

    async def start(self) -> Self:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._protocol, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def _protocol(self) -> SMTP:
        with warnings.catch_warnings():  # AUTH without TLS: on loopback, for the test, on purpose
            warnings.simplefilter("ignore", UserWarning)
            return SMTP(self, hostname="smtp.fake.test", authenticator=self._authenticate if self.password else None,
                        auth_require_tls=False, auth_required=bool(self.password),
                        auth_exclude_mechanism=["LOGIN"],  # PLAIN only: one exchange
                        tls_context=self.starttls, require_starttls=self.starttls is not None)  # fmt: skip

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _authenticate(self, server: Any, session: Session, envelope: Envelope, mechanism: str,
                      data: Any) -> AuthResult:  # fmt: skip
        ok = isinstance(data, LoginPassword) and (data.login.decode(), data.password.decode()) == (self.user,
                                                                                                    self.password)
        if ok:
            self.logins.append(self.user)
        return AuthResult(success=ok, handled=False)  # handled: aiosmtpd answers 535 itself

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.hold is not None:
            self.holding += 1
            await self.hold.wait()
        if self.fail_next > 0:
            self.fail_next -= 1
            return "451 4.3.0 try again later"
        content = envelope.original_content or envelope.content or b""
        message = email.message_from_bytes(bytes(content), policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.received.append(Delivered(str(envelope.mail_from), list(envelope.rcpt_tos), message))
        return "250 OK"

    async def wait_received(self, count: int, timeout: float = 15.0) -> list[Delivered]:
        return await arrived(self.received, count, "mails received", timeout)
