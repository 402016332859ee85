"""The email channel's config section, ``channels.email``, its checks, and its registration.

This module is the plugin as this package's entry points name it (groups ``kith.config`` and
``kith``), as ``adapters.matrix_config`` is kith's own Matrix channel: pydantic, the standard library
and kith's public API only (docs/plugins.md#the-public-api). The adapter (``kith_channel_email.adapter``:
aioimaplib, aiosmtplib) is imported only when the channel is enabled, and a missing client library is
a config problem naming the install command.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, field_validator

from gateway.channels import ChannelAccess, ChannelRegistry
from gateway.config import is_loopback_host
from gateway.hookspecs import hookimpl

if TYPE_CHECKING:
    from gateway.adapter import AdapterRegistry
    from gateway.config import Config

log = logging.getLogger("kith.adapters.email")
EXTRA = "pip install kith-channel-email"  # brings aioimaplib and aiosmtplib
_DOCTOR_S = 1.8  # the doctor gives the channels about two seconds together


class EmailConfig(ChannelAccess):
    address: str = ""  # the bot's own address: From of its mail, and never answered itself
    display_name: str = "kith"
    imap_host: str = ""
    imap_port: int = Field(993, ge=1, le=65535)
    # ssl: implicit TLS (993); starttls: TLS asked for on a plain connection (143), and no login if the server
    # offers none; plain: a server on this machine only
    imap_security: Literal["ssl", "starttls", "plain"] = "ssl"
    imap_user: str = ""  # defaults to ``address``
    imap_password: SecretStr | None = None
    mailbox: str = "INBOX"
    smtp_host: str = ""
    smtp_port: int = Field(465, ge=1, le=65535)
    smtp_security: Literal["ssl", "starttls", "plain"] = "ssl"  # plain: a server on this machine only
    ca_file: str = ""  # PEM CA certificates to trust instead of the system's (a server with a CA of its own)
    smtp_user: str = ""  # defaults to ``imap_user``
    smtp_password: SecretStr | None = None  # unset: ``imap_password``; "": no SMTP login
    # Sender authentication (docs/channels.md#email): the From header is the sender's own claim.
    # kith believes it only when the topmost Authentication-Results header written by this server
    # (its authserv-id) says DMARC, or DKIM or SPF aligned with the From domain, passed.
    authserv_id: str = ""
    require_authentication: bool = True  # false: trust From as it stands (a server that checks nothing)
    idle: bool = True  # IMAP IDLE when the server offers it; else (or false) poll
    idle_renew_s: float = Field(240, ge=5, le=1740)  # re-issue IDLE (servers and NATs drop quiet ones)
    poll_interval_s: float = Field(60, ge=0.05, le=3600)
    max_message_bytes: int = Field(10 * 1024 * 1024, ge=4096, le=50 * 1024 * 1024)  # RFC822.SIZE, checked first
    max_parts: int = Field(64, ge=1, le=1000)  # MIME parts of one mail
    max_depth: int = Field(8, ge=1, le=50)  # multipart nesting
    max_attachments: int = Field(10, ge=0, le=100)
    max_text_chars: int = Field(20_000, ge=100, le=200_000)  # the new text of one mail
    mark_seen: bool = True  # flag handled mail \\Seen (a person reading the mailbox sees what kith took)
    subject: str = "A message from kith"  # of mail kith starts (reminders); replies keep the thread's
    stall_after_s: float = Field(600, ge=0)  # no IMAP answer this long -> restart the connection

    @field_validator("address", "imap_user", "smtp_user")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.strip()

    def login_user(self) -> str:
        return self.imap_user or self.address

    def smtp_login(self) -> tuple[str, str] | None:
        password = self.smtp_password if self.smtp_password is not None else self.imap_password
        if password is None or not password.get_secret_value():
            return None
        return (self.smtp_user or self.login_user(), password.get_secret_value())

    def problems(self, config: Config, path: str) -> list[str]:
        if not self.enabled:
            return []
        found = []
        if "@" not in self.address:
            found.append(f"{path}.address: the bot's email address is required when the email channel is enabled")
        for key in ("imap_host", "smtp_host"):
            if not getattr(self, key):
                found.append(f"{path}.{key}: required when the email channel is enabled")
        if self.imap_password is None:
            found.append(f"{path}.imap_password: required when the email channel is enabled")
        for key, security in (("imap", self.imap_security), ("smtp", self.smtp_security)):
            host = getattr(self, f"{key}_host")
            if security == "plain" and host and not is_loopback_host(host):
                found.append(f"{path}.{key}_security: plain (unencrypted) is allowed only for a server on this "
                             f"machine, not {host!r}; use ssl or starttls")
        if self.ca_file and not Path(self.ca_file).is_file():
            found.append(f"{path}.ca_file: no such file: {self.ca_file}")
        if self.require_authentication and not self.authserv_id:
            found.append(f"{path}.authserv_id: the authserv-id your mail server writes in Authentication-Results "
                         "(the first word of that header in any mail it delivered) is required to believe a "
                         "sender's From; or set require_authentication: false (docs/channels.md#email)")
        if self.stall_after_s and self.idle and self.stall_after_s <= self.idle_renew_s + 30:
            found.append(f"{path}.stall_after_s: must be longer than idle_renew_s + 30 s ({self.idle_renew_s:g} s "
                         "now), or a quiet mailbox is restarted between IDLE rounds")
        if self.stall_after_s and self.stall_after_s <= self.poll_interval_s + 30:
            found.append(f"{path}.stall_after_s: must be longer than poll_interval_s + 30 s")
        if self.group_allow:
            found.append(f"{path}.group_allow: email has no groups; every mail is a one-to-one conversation")
        if importlib.util.find_spec("aioimaplib") is None or importlib.util.find_spec("aiosmtplib") is None:
            found.append(f"{path}: the email channel needs aioimaplib and aiosmtplib ({EXTRA})")
        return found

    async def doctor(self, config: Config) -> list[tuple[str, str]]:
        """IMAP: connect, log in, select the mailbox, log out. SMTP: connect, EHLO (and STARTTLS), log
        in when a password is set, quit. Nothing is sent or changed."""
        if not self.enabled:
            return []
        if importlib.util.find_spec("aioimaplib") is None or importlib.util.find_spec("aiosmtplib") is None:
            return [("fail", f"aioimaplib or aiosmtplib is not installed ({EXTRA})")]
        results = await asyncio.gather(self._doctor_imap(), self._doctor_smtp())
        return list(results)

    async def _doctor_imap(self) -> tuple[str, str]:
        import aioimaplib

        where = f"IMAP {self.imap_host}:{self.imap_port}"
        password = self.imap_password.get_secret_value() if self.imap_password else ""
        from kith_channel_email.connect import NoTLS, imap_client, start_tls

        client = imap_client(self, timeout=_DOCTOR_S)
        try:
            await client.wait_hello_from_server()
            await start_tls(client, self)
            login = await client.login(self.login_user(), password)
            if login.result != "OK":
                return ("fail", f"{where} refused the login of {self.login_user()}")
            selected = await client.select(self.mailbox)
            if selected.result != "OK":
                return ("fail", f"{where}: no mailbox {self.mailbox!r}")
            idle = "IDLE" if client.has_capability("IDLE") else "no IDLE: polling"
            await client.logout()
        except NoTLS as exc:
            return ("fail", str(exc))
        except (OSError, TimeoutError, ssl.SSLError, aioimaplib.AioImapException) as exc:
            return ("fail", f"{where} unreachable ({type(exc).__name__})")
        finally:
            transport = client.protocol.transport
            if transport is not None:
                transport.close()
        auth = f"senders checked against {self.authserv_id}" if self.require_authentication \
            else "From is not authenticated (require_authentication: false)"  # fmt: skip
        return ("ok" if self.require_authentication else "warn",
                f"{where}: signed in as {self.login_user()}, {self.mailbox} ({idle}); {auth}")

    async def _doctor_smtp(self) -> tuple[str, str]:
        import aiosmtplib

        from kith_channel_email.connect import smtp_client

        where = f"SMTP {self.smtp_host}:{self.smtp_port}"
        try:
            client = smtp_client(self, timeout=_DOCTOR_S)
            await client.connect()
            try:
                login = self.smtp_login()
                if login is not None:
                    await client.login(*login)
            finally:
                client.close()
        except aiosmtplib.SMTPAuthenticationError:
            return ("fail", f"{where} refused the login of {(self.smtp_login() or ('?',))[0]}")
        except (OSError, TimeoutError, ssl.SSLError, aiosmtplib.SMTPException) as exc:
            return ("fail", f"{where} unreachable ({type(exc).__name__})")
        return ("ok", f"{where} answers ({self.smtp_security}{', signed in' if self.smtp_login() else ''})")


@hookimpl
def gateway_register_channels(register: ChannelRegistry) -> None:
    register("email", EmailConfig)


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    section = config.channels.get("email")
    if section is None or not section.enabled:
        return  # never created, so aioimaplib and aiosmtplib are never imported
    try:
        module = importlib.import_module("kith_channel_email.adapter")
    except ImportError as exc:
        log.error("the email channel is unavailable (%s); %s", exc, EXTRA)
        return
    register(module.EmailAdapter)
