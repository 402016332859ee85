"""How the channel reaches its two servers: aioimaplib and aiosmtplib clients with kith's TLS settings,
and STARTTLS for IMAP, which aioimaplib has no command for.

``imap_security: starttls`` (port 143) asks the server for TLS before anything else is said and refuses
to go on when it offers none (``NoTLS``): the password is never sent in clear to a server that is
not on this machine, and a server on this machine gets it in clear only with ``plain``. Certificates are
checked against the system's CAs, or ``ca_file``'s, and the host name.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aioimaplib
import aiosmtplib

from gateway.adapter import AdapterAuthError
from kith_channel_email.config import EmailConfig


class NoTLS(AdapterAuthError):
    """The IMAP server would not start TLS: nothing is sent, and the channel stops (a setting to fix,
    not a network error to retry)."""


def tls_context(cfg: EmailConfig) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=cfg.ca_file or None)


def imap_client(cfg: EmailConfig, *, timeout: float) -> Any:
    """An aioimaplib client for the configured server (connecting starts at once); call ``start_tls``
    once it greeted."""
    if cfg.imap_security == "ssl":
        return aioimaplib.IMAP4_SSL(host=cfg.imap_host, port=cfg.imap_port, timeout=timeout,
                                    ssl_context=tls_context(cfg))  # fmt: skip
    return aioimaplib.IMAP4(host=cfg.imap_host, port=cfg.imap_port, timeout=timeout)


async def start_tls(client: Any, cfg: EmailConfig) -> None:
    """With ``starttls``: STARTTLS (RFC 3501 6.2.1) on the greeted connection, then the capabilities
    again (those said in clear may have been forged); nothing otherwise."""
    if cfg.imap_security != "starttls":
        return
    where = f"IMAP {cfg.imap_host}:{cfg.imap_port}"
    if not client.has_capability("STARTTLS"):
        raise NoTLS(f"{where} offers no STARTTLS: the login is not sent in clear (imap_security: ssl, or plain "
                    "for a server on this machine)")  # fmt: skip
    protocol = client.protocol
    command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop, timeout=client.timeout)
    answer = await protocol.execute(command)
    if answer.result != "OK":
        raise NoTLS(f"{where} refused STARTTLS ({answer.result})")
    loop = asyncio.get_running_loop()
    protocol.transport = await asyncio.wait_for(
        loop.start_tls(protocol.transport, protocol, tls_context(cfg), server_hostname=cfg.imap_host), client.timeout)
    await asyncio.wait_for(protocol.capability(), client.timeout)


def smtp_client(cfg: EmailConfig, *, timeout: float) -> Any:
    return aiosmtplib.SMTP(hostname=cfg.smtp_host, port=cfg.smtp_port, timeout=timeout,
                           use_tls=cfg.smtp_security == "ssl", start_tls=cfg.smtp_security == "starttls",
                           tls_context=tls_context(cfg) if cfg.smtp_security != "plain" else None)  # fmt: skip
