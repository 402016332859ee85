"""IMAP over STARTTLS (``imap_security: starttls``, port 143): against a real server that offers it
(pymap with a certificate this test makes, and ``LOGINDISABLED`` until TLS is up), the adapter starts
TLS, checks the certificate against ``ca_file`` and the host name, and only then logs in. A server
that offers no STARTTLS never gets the password: the channel stops, with the reason.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aioimaplib")
pytest.importorskip("pymap")
pytest.importorskip("aiosmtpd")

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kith_channel_email.adapter import EmailAdapter
from kith_channel_email.config import EmailConfig
from kith_channel_email.connect import NoTLS
from test_email_adapter import mail, section

from gateway.configread import parse_config
from tests.channels.stub import StubGateway
from tests.fakes.imap_server import PASSWORD, FakeIMAP
from tests.fakes.smtp_server import FakeSMTP


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca_and_server_cert(directory: Path) -> tuple[Path, Path, Path]:
    """A CA of the test's own and a server certificate it signed for 127.0.0.1: (ca, chain, key) PEM files."""
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder().subject_name(_name("kith test CA")).issuer_name(_name("kith test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(ca_ski, critical=False)
          .sign(ca_key, hashes.SHA256()))  # fmt: skip
    server = (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca.subject)
              .public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                          x509.DNSName("localhost")]), critical=False)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
              .sign(ca_key, hashes.SHA256()))  # fmt: skip
    ca_file, chain, key_file = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return ca_file, chain, key_file


@pytest.fixture
async def tls_servers(tmp_path: Path) -> AsyncIterator[tuple[FakeIMAP, FakeSMTP, Path]]:
    ca, chain, key = make_ca_and_server_cert(tmp_path)
    async with FakeIMAP(tls=(str(chain), str(key))) as imap, FakeSMTP() as smtp:
        yield imap, smtp, ca


def _gateway(tmp_path: Path, imap: FakeIMAP, smtp: FakeSMTP, **extra: Any) -> StubGateway:
    data = {"data_dir": str(tmp_path / "data"), "channels": {"email": section(imap, smtp, **extra)}}
    return StubGateway(parse_config(data, env={}))


class Eavesdropper:
    """A TCP relay in front of the server that keeps what the client sent, as anyone on the path sees it."""

    def __init__(self, port: int) -> None:
        self.target, self.port, self.heard = port, 0, bytearray()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Eavesdropper:
        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bool) -> None:
            try:
                while data := await src.read(65536):
                    if keep:
                        self.heard += data
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
            await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

        self._server = await asyncio.start_server(relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


async def test_starttls_then_login_and_mail_flows(tls_servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp, ca = tls_servers
    async with Eavesdropper(imap.port) as wire:
        via = FakeIMAP(port=wire.port)  # the adapter reaches the server through the relay
        async with _gateway(tmp_path, via, smtp, imap_security="starttls", ca_file=str(ca)) as gw:
            adapter = EmailAdapter(gw)  # type: ignore[arg-type]
            gw.start(adapter)
            await asyncio.wait_for(adapter.ready.wait(), 15)
            await imap.deliver(mail("hello over TLS"))
            (got,) = await gw.wait_inbound(1)
            assert got.text == "hello over TLS"
            (answer,) = await smtp.wait_received(1)
            assert answer.message.get_content().startswith("echo: hello over TLS")
    clear, _, rest = bytes(wire.heard).partition(b"STARTTLS\r\n")
    assert rest[:1] == b"\x16"  # what follows STARTTLS is a TLS handshake record...
    assert b"LOGIN" not in clear.upper() and PASSWORD.encode() not in wire.heard  # ... and the login is inside it


async def test_an_untrusted_certificate_is_refused(tls_servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp, _ = tls_servers
    (tmp_path / "other").mkdir()
    other_ca, _, _ = make_ca_and_server_cert(tmp_path / "other")  # a CA that did not sign the server's certificate
    async with _gateway(tmp_path, imap, smtp, imap_security="starttls", ca_file=str(other_ca)) as gw:
        task = gw.start(EmailAdapter(gw))  # type: ignore[arg-type]
        with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):  # a network error: the supervisor retries
            await asyncio.wait_for(task, 15)


async def test_no_starttls_on_offer_means_no_password_sent(tmp_path: Path) -> None:
    """A server (or a man in the middle that strips STARTTLS) offering only a login in clear."""
    heard: list[bytes] = []

    async def plain_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"* OK [CAPABILITY IMAP4rev1 LOGIN IDLE] ready\r\n")
        while line := await reader.readline():
            heard.append(line)
            tag, _, command = line.decode().partition(" ")
            if command.upper().startswith("CAPABILITY"):
                writer.write(f"* CAPABILITY IMAP4rev1 LOGIN IDLE\r\n{tag} OK done\r\n".encode())
            else:
                writer.write(f"{tag} OK fine\r\n".encode())
            await writer.drain()

    server = await asyncio.start_server(plain_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with FakeSMTP() as smtp:
            fake = FakeIMAP(port=port)  # only its port is used: nothing was started
            async with _gateway(tmp_path, fake, smtp, imap_security="starttls") as gw:
                task = gw.start(EmailAdapter(gw))  # type: ignore[arg-type]
                with pytest.raises(NoTLS, match="offers no STARTTLS: the login is not sent in clear"):
                    await asyncio.wait_for(task, 15)
                imap_said, _ = await gw.config.channels.section("email", EmailConfig).doctor(gw.config)
                assert imap_said[0] == "fail" and "offers no STARTTLS" in imap_said[1]  # kith doctor says why
    finally:
        server.close()
        await server.wait_closed()
    assert heard and not any(PASSWORD.encode() in line or b"LOGIN" in line.upper() for line in heard), heard
