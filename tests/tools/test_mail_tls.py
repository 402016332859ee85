"""The mail tools' TLS (plugins/tools/mail_client.py) against real servers with certificates made by the
test: pymap over implicit TLS (imaps://) and aiosmtpd with STARTTLS (smtp://, required) and implicit TLS
(smtps://). The connection is pinned to the checked address, and the certificate is verified against
the host *name*: one for another name is refused, and so is an SMTP server that offers no STARTTLS
(no silent downgrade to plain text with the password in it). The test's CA is trusted through
``SSL_CERT_FILE``, which Python's default context reads."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from plugins.tools.mail_client import MailAccount, MailError, inbox, send
from plugins.tools.netguard import Allowlist
from tests.fakes.imap_server import USER, FakeIMAP
from tests.fakes.smtp_server import FakeSMTP
from tests.tools.test_pinned_tls import make_cert

PASSWORD = "tls-test-pass"
# Loopback is reachable by its network only: the name "localhost" is not listed, so plain text is not allowed.
LOOPBACK = Allowlist.parse(["127.0.0.0/8"])


def server_context(cert: tuple[Path, Path]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*cert)
    return ctx


@pytest.fixture
def certs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ssl.SSLContext, ssl.SSLContext]]:
    """A server context for localhost (trusted) and one for other.example (trusted too, wrong name)."""
    good, wrong = make_cert(tmp_path, "localhost"), make_cert(tmp_path, "other.example")
    bundle = tmp_path / "trusted.pem"
    bundle.write_bytes(good[0].read_bytes() + wrong[0].read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    yield server_context(good), server_context(wrong)


def account(imap: str, smtp: str) -> MailAccount:
    return MailAccount(imap=imap, smtp=smtp, username=USER, password=PASSWORD, address=USER)


def mail() -> EmailMessage:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = USER, "bob@example.org", "over TLS"
    msg.set_content("sent over TLS")
    return msg


async def test_imaps_and_smtp_starttls_verify_the_name(certs: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    good, _ = certs
    async with (FakeIMAP(password=PASSWORD, idle=False, implicit_tls=good) as imap,
                FakeSMTP(user=USER, password=PASSWORD, starttls=good) as smtp):
        await imap.deliver(b"From: ada@example.org\r\nSubject: hello\r\n\r\nhi\r\n")
        acct = account(f"imaps://localhost:{imap.port}", f"smtp://localhost:{smtp.port}")
        async with inbox(acct, LOOPBACK, 10) as box:
            assert len(await box.search(["ALL"])) == 1
        await send(acct, LOOPBACK, 10, mail())
        (delivered,) = smtp.received
        assert delivered.message["Subject"] == "over TLS"


async def test_implicit_tls_smtp(certs: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    good, _ = certs
    async with FakeSMTP(user=USER, password=PASSWORD, tls=good) as smtp:
        await send(account("imaps://localhost:1", f"smtps://localhost:{smtp.port}"), LOOPBACK, 10, mail())
        assert len(smtp.received) == 1


async def test_a_certificate_for_another_name_is_refused(certs: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    _, wrong = certs
    async with (FakeIMAP(password=PASSWORD, idle=False, implicit_tls=wrong) as imap,
                FakeSMTP(user=USER, password=PASSWORD, starttls=wrong) as smtp,
                FakeSMTP(user=USER, password=PASSWORD, tls=wrong) as smtps):
        acct = account(f"imaps://localhost:{imap.port}", f"smtp://localhost:{smtp.port}")
        with pytest.raises(MailError, match="cannot reach the IMAP server"):
            async with inbox(acct, LOOPBACK, 10):
                pass
        with pytest.raises(MailError, match="was not sent"):
            await send(acct, LOOPBACK, 10, mail())
        with pytest.raises(MailError, match="was not sent"):
            await send(account("x", f"smtps://localhost:{smtps.port}"), LOOPBACK, 10, mail())
        assert smtp.received == [] and smtps.received == [] and smtp.logins == [] and smtps.logins == []


async def test_no_starttls_no_password_sent(certs: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    async with FakeSMTP(user=USER, password=PASSWORD) as plain:  # offers no STARTTLS
        with pytest.raises(MailError, match="was not sent"):
            await send(account("x", f"smtp://localhost:{plain.port}"), LOOPBACK, 10, mail())
        assert plain.logins == [] and plain.received == []
