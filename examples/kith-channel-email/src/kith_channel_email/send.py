"""Mail kith sends: composed (threaded answers, new mails, files) and handed to the SMTP server.

An answer goes to the sender only, keeps the thread's subject, and carries ``In-Reply-To`` and
``References`` so every client files it in the thread; it quotes nothing. ``Auto-Submitted`` (RFC 3834)
tells other robots not to answer it. One SMTP connection per mail (kith sends a few a day, and a
connection held open would need its own supervision); a temporary failure is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, formataddr, make_msgid
from typing import Any

import aiosmtplib

from adapters.ratelimit import with_retry
from kith_channel_email.config import EmailConfig
from kith_channel_email.connect import smtp_client

SMTP_RETRY_S = 2.0  # after a temporary SMTP failure (4xx, a dropped connection)
QUIT_S = 5.0  # the server's goodbye after a sent mail: waited for this long, then the connection is closed
REFERENCES_KEPT = 20  # the thread's first Message-ID and its last 19


def compose(cfg: EmailConfig, to: str, text: str, *, thread: dict[str, Any] | None,
            file: tuple[str, str, str, bytes] | None = None) -> EmailMessage:  # fmt: skip
    """A mail from kith to ``to``: an answer in ``thread`` (recipient, subject, references) when
    given, else a new mail with the configured subject; ``file`` is (name, maintype, subtype, data)."""
    msg = EmailMessage()
    msg["From"] = formataddr((cfg.display_name, cfg.address))
    msg["To"] = to
    msg["Date"] = format_datetime(datetime.now(UTC))
    msg["Message-ID"] = make_msgid(domain=cfg.address.rsplit("@", 1)[1].lower())
    msg["Auto-Submitted"] = "auto-replied" if thread else "auto-generated"
    if thread:
        subject = str(thread.get("subject") or "")
        msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}".strip()
        refs = [str(r) for r in thread.get("refs") or []]
        if refs:
            msg["In-Reply-To"] = refs[-1]
            msg["References"] = " ".join(refs)
    else:
        msg["Subject"] = cfg.subject
    msg.set_content(text or (file[0] if file else ""))
    if file is not None:
        msg.add_attachment(file[3], maintype=file[1], subtype=file[2], filename=file[0])
    return msg


def keep_references(refs: list[str]) -> list[str]:
    return refs[:1] + refs[1:][-(REFERENCES_KEPT - 1):]


async def send_mail(cfg: EmailConfig, msg: EmailMessage, lock: asyncio.Lock) -> None:
    """Deliver ``msg`` to the SMTP server (one at a time, under ``lock``), retrying temporary failures."""
    login = cfg.smtp_login()

    async def once() -> None:
        client = smtp_client(cfg, timeout=30)
        await client.connect()
        try:
            if login is not None:
                await client.login(*login)
            await client.send_message(msg)
        except BaseException:
            # Failed or cancelled: close at once. aiosmtplib's ``async with`` would say QUIT and wait its
            # whole timeout for the answer, and a server still busy with this mail's DATA does not answer
            # it: a restart or a shutdown waited 30 s on a cancelled send.
            client.close()
            raise
        with contextlib.suppress(Exception):  # sent: a goodbye that fails must not lead to a second send
            await asyncio.wait_for(client.quit(), QUIT_S)
        client.close()

    async with lock:
        await with_retry(once, retry_after=retry_after, what="email SMTP send")


def retry_after(exc: BaseException) -> float | None:
    """A temporary SMTP failure (4xx) or a dropped connection is retried; a refusal (5xx) is not."""
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return SMTP_RETRY_S if 400 <= exc.code < 500 else None
    if isinstance(exc, aiosmtplib.SMTPServerDisconnected | aiosmtplib.SMTPConnectError | ConnectionError):
        return SMTP_RETRY_S
    return None
