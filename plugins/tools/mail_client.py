"""IMAP and SMTP for the mail tools: a person's account, every connection pinned to the address the
SSRF guard checked (``plugins.tools.netguard``), the inbox opened read-only.

The person names their servers as ``host``, ``host:port`` or a URL: ``imaps://`` (implicit TLS, the
default, port 993) or ``imap://`` (plain, port 143); ``smtps://`` (implicit TLS, the default, port 465)
or ``smtp://`` (port 587, STARTTLS required). The password travels over these connections, so plain
IMAP and SMTP without STARTTLS are only for hosts the operator listed in ``tools.mail.allow_hosts``
(a server on the intranet or this machine). Every host must resolve to public addresses unless listed
there; the connection then goes to exactly the address that was checked, TLS verified against the name.

The inbox is read with ``BODY.PEEK``: reading a mail for the person marks nothing as read. (It is
opened with ``SELECT``: aioimaplib does not count ``EXAMINE`` as selecting a mailbox and refuses
``SEARCH`` after it.) A mail's size (``RFC822.SIZE``) is checked before a byte of it is fetched. aioimaplib
and aiosmtplib (the ``email`` extra) are imported only when a connection is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import re
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from plugins.tools.netguard import Allowlist, BlockedAddress, resolve_checked

log = logging.getLogger("kith.tools.mail")

_UID = re.compile(rb"\bUID (\d+)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_FLAGS = re.compile(rb"\bFLAGS \(([^)]*)\)")
_LIST = re.compile(rb'^(?:\* LIST )?\(([^)]*)\) (?:"([^"]*)"|NIL) (.+?)\r?\n?$')
MAX_HEADER_BYTES = 16_384  # the From/Subject/Date fields of one listed mail


class MailError(Exception):
    """A failure to show the person and the model (never a secret in it)."""


@dataclass(frozen=True, slots=True)
class Server:
    host: str
    port: int
    tls: str  # "ssl" (implicit TLS), "starttls" (required), "opportunistic" (allowed host only), "plain"


@dataclass(frozen=True, slots=True)
class MailAccount:
    imap: str
    smtp: str
    username: str
    password: str
    address: str  # the From of what is sent

    def __repr__(self) -> str:  # never the password, whatever prints it
        return f"MailAccount(imap={self.imap!r}, smtp={self.smtp!r}, username={self.username!r})"

    def values(self) -> dict[str, str]:
        return {"imap": self.imap, "smtp": self.smtp, "username": self.username, "password": self.password,
                "address": self.address}

    @classmethod
    def of(cls, values: dict[str, str]) -> MailAccount:
        return cls(**{k: str(values.get(k, "")) for k in ("imap", "smtp", "username", "password", "address")})


@dataclass(frozen=True, slots=True)
class Listed:
    uid: int
    size: int
    seen: bool
    header: bytes  # From, Subject, Date as the server sent them (untrusted)


def _allowed(allow: Allowlist, host: str) -> bool:
    if allow.allows_host(host):
        return True
    try:
        return allow.allows_ip(ipaddress.ip_address(host))
    except ValueError:
        return False


def server(url: str, kind: str, allow: Allowlist) -> Server:
    """Where ``url`` (an IMAP or SMTP server, ``kind`` "imap" or "smtp") is and how to talk to it."""
    if "://" not in url:
        url = f"{kind}s://{url}"
    parts = urlsplit(url)
    try:
        port = parts.port
        host = parts.hostname or ""
    except ValueError:
        host, port = "", None
    if parts.scheme not in (kind, kind + "s") or not host or parts.username or parts.path not in ("", "/"):
        raise MailError(f"the {kind.upper()} server must be host, host:port or {kind}s://host:port")
    allowed = _allowed(allow, host)
    if parts.scheme == kind + "s":
        return Server(host, port or (993 if kind == "imap" else 465), "ssl")
    if kind == "imap":
        if not allowed:
            raise MailError("IMAP without TLS (imap://) is only for hosts in tools.mail.allow_hosts; use imaps://")
        return Server(host, port or 143, "plain")
    return Server(host, port or 587, "opportunistic" if allowed else "starttls")


async def checked_address(srv: Server, allow: Allowlist) -> str:
    try:
        return str(await resolve_checked(srv.host, srv.port, allow))
    except BlockedAddress as exc:
        raise MailError(str(exc).replace("tools.web_fetch", "tools.mail")) from None


@functools.cache
def _pinned_imap() -> type:
    import aioimaplib

    class PinnedIMAP(aioimaplib.IMAP4):  # type: ignore[misc]
        """aioimaplib's client connecting to the checked address, verifying TLS against the name."""

        def __init__(self, ip: str, srv: Server, timeout: float) -> None:
            self._server = srv
            super().__init__(host=ip, port=srv.port, timeout=timeout)

        def create_client(self, host: str, port: int, loop: Any, conn_lost_cb: Any = None,
                          ssl_context: Any = None) -> None:
            local = loop if loop is not None else asyncio.get_running_loop()
            self.protocol = aioimaplib.IMAP4ClientProtocol(local, conn_lost_cb)
            tls = ssl.create_default_context() if self._server.tls == "ssl" else None
            self._client_task = local.create_task(local.create_connection(
                lambda: self.protocol, host, port, ssl=tls, server_hostname=self._server.host if tls else None))

    return PinnedIMAP


class Inbox:
    """The person's INBOX on one IMAP connection; nothing here changes a flag."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def _ok(self, call: Any, what: str) -> list[Any]:
        resp = await call
        if resp.result != "OK":
            raise MailError(f"the IMAP server refused the {what}")
        return list(resp.lines)

    async def search(self, criteria: list[str]) -> list[int]:
        lines = await self._ok(self.client.uid_search(*criteria), "search")
        return sorted({int(u) for line in lines[:-1] if isinstance(line, bytes | bytearray)
                       for u in bytes(line).split() if u.isdigit()})

    async def listed(self, uids: list[int]) -> list[Listed]:
        """Size, seen flag and the From/Subject/Date header of each mail (the newest first)."""
        if not uids:
            return []
        lines = await self._ok(self.client.uid(
            "fetch", ",".join(map(str, uids)), "(UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS (FROM SUBJECT DATE)])"),
            "fetch")
        out: list[Listed] = []
        literal = False  # the line after "... {n}" is a literal: a stranger's header bytes, never parsed as a reply
        for i, line in enumerate(lines[:-1]):
            text = bytes(line) if isinstance(line, bytes | bytearray) else b""
            was_literal, literal = literal, text.rstrip().endswith(b"}")
            if was_literal or b"FETCH" not in text:
                continue
            uid, size, flags = _UID.search(text), _SIZE.search(text), _FLAGS.search(text)
            after = lines[i + 1]
            header = bytes(after)[:MAX_HEADER_BYTES] if literal and isinstance(after, bytes | bytearray) else b""
            if uid is None and literal and i + 2 < len(lines):  # some servers put UID after the literal
                uid = _UID.search(bytes(lines[i + 2])) if isinstance(lines[i + 2], bytes | bytearray) else None
            if uid is not None:
                out.append(Listed(uid=int(uid.group(1)), size=int(size.group(1)) if size else 0,
                                  seen=bool(flags and b"\\Seen" in flags.group(1)), header=header))
        return sorted(out, key=lambda m: m.uid, reverse=True)

    async def raw(self, uid: int, max_bytes: int) -> bytes:
        """The whole mail ``uid``; its size is checked before it is fetched."""
        lines = await self._ok(self.client.uid("fetch", str(uid), "(UID RFC822.SIZE)"), "fetch")
        sizes = [int(m.group(1)) for line in lines if isinstance(line, bytes | bytearray)
                 for m in [_SIZE.search(bytes(line))] if m]
        if not sizes:
            raise MailError(f"no mail with id {uid} in the inbox")
        if sizes[0] > max_bytes:
            raise MailError(f"mail {uid} is {sizes[0]} bytes, more than the {max_bytes} read here")
        lines = await self._ok(self.client.uid("fetch", str(uid), "(UID BODY.PEEK[])"), "fetch")
        for i, line in enumerate(lines[:-1]):
            if isinstance(line, bytes | bytearray) and b"BODY[" in line and bytes(line).rstrip().endswith(b"}"):
                body = lines[i + 1]
                if isinstance(body, bytes | bytearray) and len(body) <= max_bytes:
                    return bytes(body)
        raise MailError(f"mail {uid} could not be fetched")

    async def thread_of(self, uid: int) -> bytes:
        """The Message-ID, References and Subject header fields of mail ``uid`` (an answer's threading)."""
        lines = await self._ok(self.client.uid(
            "fetch", str(uid), "(UID BODY.PEEK[HEADER.FIELDS (MESSAGE-ID REFERENCES SUBJECT)])"), "fetch")
        for i, line in enumerate(lines[:-1]):
            if isinstance(line, bytes | bytearray) and b"BODY[" in line and bytes(line).rstrip().endswith(b"}"):
                body = lines[i + 1]
                if isinstance(body, bytes | bytearray):
                    return bytes(body)[:MAX_HEADER_BYTES]
        raise MailError(f"no mail with id {uid} in the inbox")

    async def drafts(self) -> str:
        """The person's drafts folder: the one marked ``\\Drafts`` (RFC 6154), else one named Drafts
        (``INBOX.Drafts`` on servers that nest everything in the INBOX), else a new ``Drafts``."""
        lines = await self._ok(self.client.list('""', "*"), "folder list")
        named = ""
        for line in lines[:-1]:
            found = _LIST.match(bytes(line)) if isinstance(line, bytes | bytearray) else None
            if found is None:
                continue
            name = found.group(3).decode("utf-8", "replace").strip('"')
            if b"\\drafts" in found.group(1).lower():
                return name
            if not named and name.rsplit(found.group(2).decode() or "/", 1)[-1].lower() == "drafts":
                named = name
        if not named:
            await self.client.create("Drafts")
            named = "Drafts"
        return named

    async def append(self, mailbox: str, raw: bytes, flags: str) -> None:
        quoted = f'"{mailbox}"' if " " in mailbox else mailbox
        if (await self.client.append(raw, mailbox=quoted, flags=flags)).result != "OK":
            raise MailError(f"the IMAP server refused to store the mail in {mailbox}")


@asynccontextmanager
async def inbox(account: MailAccount, allow: Allowlist, timeout_s: float) -> AsyncIterator[Inbox]:
    """The account's INBOX, logged in and selected; raises MailError."""
    srv = server(account.imap, "imap", allow)
    ip = await checked_address(srv, allow)
    client = _pinned_imap()(ip, srv, timeout_s)
    try:
        try:
            await client.wait_hello_from_server()
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            raise MailError(f"cannot reach the IMAP server {srv.host}:{srv.port} ({type(exc).__name__})") from None
        if (await client.login(account.username, account.password)).result != "OK":
            raise MailError("the IMAP server refused the user name or password")
        if (await client.select("INBOX")).result != "OK":
            raise MailError("the IMAP server did not open the INBOX")
        yield Inbox(client)
    finally:
        await _close(client)


async def _close(client: Any) -> None:
    try:
        if client.protocol is not None and client.get_state() in ("AUTH", "SELECTED"):
            async with asyncio.timeout(2):
                await client.logout()
    except Exception:  # a session that ends badly is closed all the same
        log.debug("IMAP logout failed", exc_info=True)
    transport = getattr(client.protocol, "transport", None)
    if transport is not None:
        transport.close()


async def send(account: MailAccount, allow: Allowlist, timeout_s: float, msg: EmailMessage | None) -> None:
    """Hand ``msg`` to the account's SMTP server, logged in (``None``: only log in, to check the account);
    raises MailError. A failure is not retried: the person approved one send, and a second attempt after
    an unclear failure could send it twice."""
    import aiosmtplib

    srv = server(account.smtp, "smtp", allow)
    ip = await checked_address(srv, allow)
    sock = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.get_running_loop().sock_connect(sock, (ip, srv.port))
        client = aiosmtplib.SMTP(hostname=srv.host, sock=sock, timeout=timeout_s, use_tls=srv.tls == "ssl",
                                 start_tls=True if srv.tls == "starttls" else None)
        await client.connect()
        try:
            await client.login(account.username, account.password)
            if msg is not None:
                await client.send_message(msg)
        except BaseException:
            client.close()  # not QUIT: a server still reading the DATA of a cancelled send never answers it
            raise
        with contextlib.suppress(Exception):  # sent: the goodbye changes nothing
            await asyncio.wait_for(client.quit(), min(timeout_s, 5.0))
        client.close()
    except aiosmtplib.SMTPAuthenticationError:
        raise MailError("the SMTP server refused the user name or password") from None
    except aiosmtplib.SMTPRecipientsRefused:
        raise MailError("the SMTP server refused the recipient") from None
    except (aiosmtplib.SMTPException, OSError, ssl.SSLError, TimeoutError) as exc:
        raise MailError(f"the mail was not sent: the SMTP server {srv.host}:{srv.port} failed "
                        f"({type(exc).__name__})") from None
    finally:
        sock.close()
