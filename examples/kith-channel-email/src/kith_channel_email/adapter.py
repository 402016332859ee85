"""Email adapter: IMAP in (aioimaplib, IDLE with a polling fallback), SMTP out (aiosmtplib).

* Progress is the mailbox's UIDs: ``<data_dir>/channels/email/state.json`` keeps ``UIDVALIDITY`` and
  the mark below which every mail was handled (``kith_channel_email.progress``: a mail whose turn still
  runs holds it back), written as it moves. A restart fetches only what lies above it: a turn cut
  short is taken again, an answered mail is one turn (the host dedupes by ``UIDVALIDITY:UID``). The
  very first start, or a mailbox whose ``UIDVALIDITY`` changed, answers nothing already there.
* Fetching: ``UID FETCH (RFC822.SIZE INTERNALDATE)`` first, and a mail over ``max_message_bytes`` is
  never downloaded (a sender in ``allow_from`` is told); the rest with ``BODY.PEEK[]``, at most
  ``_IN_FLIGHT`` at once, parsed in a thread (``gateway.mailparse``: limits, quoted text and
  signature cut, HTML as text). A lost connection ends ``run`` at once, for the supervisor.
* Who: the account id is the From address; it is believed only when the server's
  ``Authentication-Results`` (``authserv_id``) vouch for it, unless ``require_authentication`` is
  off. Mail from machines (bounces, lists, auto-replies) and from the bot itself is never answered.
  The host's access policy (pairing, ``allow_from``) runs on what is left.
* Threads: one conversation per thread (its first Message-ID), ``<address>#<hash>``; a reply carries
  ``In-Reply-To`` and ``References`` and keeps the subject, and quotes nothing. Files come in as
  attachments for the media pipeline; ``send_file`` mails one. ``send`` (reminders) starts a new mail
  (``kith_channel_email.send``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import aioimaplib

from gateway.adapter import Adapter, AdapterAuthError
from gateway.logs import install_redaction
from gateway.mailparse import MailLimits, MailRefused, ParsedMail, is_address, parse_mail
from gateway.media.errors import AttachmentUnavailable, TooLarge
from gateway.types import Attachment, ConversationAddress, ConversationKind, InboundMessage, Reply
from gateway.util.tasks import EventTasks, unless_set
from kith_channel_email.config import EmailConfig
from kith_channel_email.connect import imap_client, start_tls
from kith_channel_email.progress import UidMark
from kith_channel_email.send import compose, keep_references, send_mail

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.adapters.email")
T = TypeVar("T")

_IMAP_TIMEOUT_S = 30.0
_THREADS_KEPT = 500
_NOTICE_FIELDS = "FROM AUTHENTICATION-RESULTS SUBJECT MESSAGE-ID REFERENCES IN-REPLY-TO AUTO-SUBMITTED PRECEDENCE"
_MAX_HEAD = 64 * 1024
_IN_FLIGHT = 4  # mails held and handled at once (each up to max_message_bytes)
_UID = re.compile(rb"\bUID (\d+)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_ARRIVED = re.compile(rb'\bINTERNALDATE "([ 0-9]{1,2}-[A-Za-z]{3}-\d{4} \d\d:\d\d:\d\d [+-]\d{4})"')


def conversation_of(sender: str, thread: str) -> str:
    return f"{sender}#{hashlib.sha256(thread.encode()).hexdigest()[:12]}" if thread else sender


def address_of(conversation_id: str) -> str:
    return conversation_id.split("#", 1)[0]


def kind_of(mime_type: str) -> str:
    top = mime_type.split("/", 1)[0]
    return {"image": "photo", "audio": "audio", "video": "video"}.get(top, "document")


class EmailAdapter(Adapter):
    name: ClassVar[str] = "email"
    max_message_chars: ClassVar[int] = 100_000  # one mail holds a whole reply

    def __init__(self, gateway: Services, config: EmailConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("email", EmailConfig)
        super().__init__(gateway, cfg)
        self.cfg: EmailConfig = cfg
        if not cfg.imap_host or not cfg.smtp_host or "@" not in cfg.address:
            raise ValueError("channels.email.address, imap_host and smtp_host are required")
        self.stall_after_s = cfg.stall_after_s  # type: ignore[misc]  # per instance, from config
        self.ready = asyncio.Event()
        self.idling = False  # in an IDLE round: mail arrives by the server's push
        self._stop = asyncio.Event()
        self._address = cfg.address.lower()
        self._limits = MailLimits(max_parts=cfg.max_parts, max_depth=cfg.max_depth,
                                  max_attachments=cfg.max_attachments, max_text_chars=cfg.max_text_chars)  # fmt: skip
        self._store = Path(gateway.config.data_dir) / "channels" / "email" / "state.json"
        self._uidvalidity = 0
        self._loaded = False  # the mark is read from the state file (or set for a first start)
        self._mark = UidMark()
        self._threads: dict[str, dict[str, Any]] = {}
        self._files: dict[str, bytes] = {}  # attachment id -> bytes, while its turn runs
        self._tasks = EventTasks(log, "email: handling a mail")
        self._send_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(_IN_FLIGHT)
        self._save_lock = asyncio.Lock()
        self._lost = asyncio.Event()
        self.stats = {"fetched": 0, "turns": 0, "sent": 0, "refused": 0, "too_large": 0, "automated": 0,
                      "unauthenticated": 0, "idle": 0, "polls": 0}  # fmt: skip

    # ----------------------------------------------------------------------------------- lifecycle
    async def run(self) -> None:
        self._stop.clear()
        self._slots = asyncio.Semaphore(_IN_FLIGHT)  # a task cancelled before it started kept no slot
        secrets = [s.get_secret_value() for s in (self.cfg.imap_password, self.cfg.smtp_password) if s]
        install_redaction([s for s in secrets if s])
        client = imap_client(self.cfg, timeout=_IMAP_TIMEOUT_S)
        self._lost = asyncio.Event()
        client.protocol.conn_lost_cb = lambda _exc: self._lost.set()  # (IMAP4_SSL takes no callback)
        try:
            if await self._until_stopped(_greeted(client, self.cfg)) is None:
                return  # stopped while the server had not answered yet
            password = self.cfg.imap_password.get_secret_value() if self.cfg.imap_password else ""
            login = await client.login(self.cfg.login_user(), password)
            if login.result != "OK":
                raise AdapterAuthError(f"email: the IMAP server refused the login of {self.cfg.login_user()}")
            selected = await client.select(self.cfg.mailbox)
            if selected.result != "OK":
                raise AdapterAuthError(f"email: the IMAP server has no mailbox {self.cfg.mailbox!r}")
            status = _status(selected.lines)
            if "UIDNEXT" not in status:  # required by RFC 3501, but a first start must never answer history
                every = await self._imap(client.uid_search("ALL"))
                status["UIDNEXT"] = 1 + max((int(u) for line in every.lines[:-1] for u in bytes(line).split()
                                             if u.isdigit()), default=0)  # fmt: skip
            await asyncio.to_thread(self._load, status)
            self.touch()
            self.mark_connected()
            self.ready.set()
            idle = self.cfg.idle and client.has_capability("IDLE")
            while not self._stop.is_set():
                if self._lost.is_set():
                    raise ConnectionError("email: the IMAP server closed the connection")
                await self._catch_up(client)
                if idle:
                    await self._idle(client)
                else:
                    self.stats["polls"] += 1
                    await self._pause(self.cfg.poll_interval_s)
                    if self._stop.is_set() or self._lost.is_set():
                        continue
                    await self._imap(client.noop())  # the connection still answers: activity for the watchdog
                    self.touch()
        finally:
            self.ready.clear()
            await self._tasks.cancel_all()
            if self._loaded:
                # A mail handled just before the stop moved the mark, but its write may have been
                # cancelled with its task: a restart would answer that mail again.
                with contextlib.suppress(OSError):
                    await self._persist()
            if not self._lost.is_set():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.logout(), 2)
            with contextlib.suppress(Exception):
                client.protocol.transport.close()

    async def _idle(self, client: Any) -> None:
        """One IDLE round: until the server pushes something, ``idle_renew_s`` passes, or stop."""
        # Mail that came during the catch-up is announced now, not necessarily once IDLE starts.
        news = await self._imap(client.noop())
        if any(b"EXISTS" in bytes(line) for line in news.lines if isinstance(line, bytes | bytearray)):
            return
        self.stats["idle"] += 1
        waiting = await client.idle_start(timeout=self.cfg.idle_renew_s)
        self.idling = True
        try:
            push = asyncio.ensure_future(client.wait_server_push(timeout=self.cfg.idle_renew_s + 5))
            stopped = asyncio.ensure_future(self._stop.wait())
            lost = asyncio.ensure_future(self._lost.wait())
            await asyncio.wait({push, stopped, lost}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            lost.cancel()
            if self._lost.is_set():
                push.cancel()
                raise ConnectionError("email: the IMAP server closed the connection")
            if not push.done():
                push.cancel()
            elif push.exception() is not None and not isinstance(push.exception(), TimeoutError):
                raise push.exception()  # type: ignore[misc]
        finally:
            self.idling = False
            if not self._lost.is_set():
                client.idle_done()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiting, 10)
            else:
                waiting.cancel()
        self.touch()

    async def _imap(self, call: Awaitable[T]) -> T:
        """``call``'s answer; ConnectionError as soon as the connection is lost (aioimaplib would leave
        a command in flight waiting for its timeout)."""
        work = asyncio.ensure_future(call)
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
        if work.cancelled():
            raise ConnectionError("email: the IMAP server closed the connection")
        return work.result()

    async def _pause(self, seconds: float) -> None:
        """``seconds``, or less when stopped or the connection is lost."""
        waits = {asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(self._lost.wait())}
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _until_stopped(self, call: Awaitable[T]) -> T | None:
        """``call``'s result, or None once ``stop()`` was asked for (a long poll must not hold it up)."""
        return await unless_set(call, self._stop)

    async def stop(self) -> None:
        self._stop.set()

    def health(self) -> dict[str, Any]:
        return {"address": self._address, "last_uid": self._mark.done_to, **self.stats}

    # ------------------------------------------------------------------------------------ progress
    def _load(self, status: dict[str, int]) -> None:
        uidvalidity, uidnext = status.get("UIDVALIDITY", 0), status.get("UIDNEXT", 0)
        try:
            saved = json.loads(self._store.read_text())
        except (OSError, ValueError):
            saved = {}
        if not isinstance(saved, dict):
            saved = {}
        threads = saved.get("threads")
        self._threads = threads if isinstance(threads, dict) else {}
        same = saved.get("account") == self.cfg.login_user() and saved.get("mailbox") == self.cfg.mailbox
        if same and saved.get("uidvalidity") == uidvalidity and isinstance(saved.get("done_to"), int):
            self._uidvalidity, done_to = uidvalidity, saved["done_to"]
        else:
            if saved:
                log.warning("email: %s was recreated on the server (UIDVALIDITY changed): mail already in it is "
                            "not answered", self.cfg.mailbox)  # fmt: skip
            # What is in the mailbox before kith first looks is history, not mail to answer.
            self._uidvalidity, done_to = uidvalidity, max(0, uidnext - 1)
        self._mark.reset(done_to)
        _write(self._store, self._dump())
        self._loaded = True

    def _dump(self) -> str:
        return json.dumps({"account": self.cfg.login_user(), "mailbox": self.cfg.mailbox,
                           "uidvalidity": self._uidvalidity, "done_to": self._mark.done_to, "threads": self._threads})

    async def _finish(self, uid: int) -> None:
        if self._mark.finish(uid):
            await self._persist()

    async def _persist(self) -> None:
        data = self._dump()  # on the loop: the thread dict changes under a writer in another thread
        async with self._save_lock:
            await asyncio.to_thread(_write, self._store, data)

    # ------------------------------------------------------------------------------------- inbound
    async def _catch_up(self, client: Any) -> None:
        found = await self._imap(client.uid_search(f"UID {self._mark.done_to + 1}:*"))
        if found.result != "OK":
            raise ConnectionError(f"email: UID SEARCH failed ({found.result})")
        self.touch()
        # "n:*" always matches the newest mail, even one below n: the mark filters it out.
        new = self._mark.new([int(u) for line in found.lines[:-1] for u in line.split() if u.isdigit()])
        if not new:
            return
        sizes = await self._sizes(client, new)
        for uid in new:
            size, arrived = sizes.get(uid, (None, None))
            self._mark.start(uid)
            if size is None:
                await self._finish(uid)  # expunged between SEARCH and FETCH
                continue
            if size > self.cfg.max_message_bytes:
                self.stats["too_large"] += 1
                log.warning("email: mail UID %d refused unread: %d bytes is over max_message_bytes (%d)", uid, size,
                            self.cfg.max_message_bytes)  # fmt: skip
                await self._mark_seen(client, uid)
                await self._too_large(client, uid, size)
                await self._finish(uid)
                continue
            # At most _IN_FLIGHT mails are held and handled at once: a flood costs that many, not all.
            await self._slots.acquire()
            try:
                raw = await self._fetch(client, uid)
            except BaseException:
                self._slots.release()
                raise
            self.stats["fetched"] += 1
            if raw is None:
                self._slots.release()
                await self._finish(uid)
                continue
            self._tasks.spawn(self._handle(uid, raw, arrived))
            await self._mark_seen(client, uid)

    async def _sizes(self, client: Any, uids: list[int]) -> dict[int, tuple[int, datetime | None]]:
        """Each mail's size and when the server received it (the sender's ``Date:`` is only their word)."""
        resp = await self._imap(client.uid("fetch", ",".join(map(str, uids)), "(UID RFC822.SIZE INTERNALDATE)"))
        if resp.result != "OK":
            raise ConnectionError(f"email: UID FETCH of sizes failed ({resp.result})")
        sizes: dict[int, tuple[int, datetime | None]] = {}
        for line in resp.lines:
            text = bytes(line) if isinstance(line, bytes | bytearray) else b""
            uid, size = _UID.search(text), _SIZE.search(text)
            if uid and size:
                sizes[int(uid.group(1))] = (int(size.group(1)), _arrived(text))
        return sizes

    async def _fetch(self, client: Any, uid: int, part: str = "BODY.PEEK[]", limit: int = 0) -> bytes | None:
        """The literal ``part`` of mail ``uid`` (the whole mail by default); None when the server has
        none or sends more than ``limit`` (``max_message_bytes``) after all."""
        resp = await self._imap(client.uid("fetch", str(uid), f"(UID {part})"))
        if resp.result != "OK":
            raise ConnectionError(f"email: UID FETCH failed ({resp.result})")
        lines = resp.lines
        for i, line in enumerate(lines[:-1]):
            # "* n FETCH (UID u BODY[] {size}": the literal is the next line (UID may also come after it)
            if isinstance(line, bytes) and b"BODY[" in line and line.rstrip().endswith(b"}"):
                body = lines[i + 1]
                if isinstance(body, bytearray | bytes) and len(body) <= (limit or self.cfg.max_message_bytes):
                    return bytes(body)
                self.stats["too_large"] += 1
                return None
        return None

    async def _too_large(self, client: Any, uid: int, size: int) -> None:
        """Tell a sender in ``allow_from`` (whose server vouched for them) that their mail was not read;
        from its header fields alone. Anyone else gets silence: an answer would be backscatter."""
        head = await self._fetch(client, uid, f"BODY.PEEK[HEADER.FIELDS ({_NOTICE_FIELDS})]", limit=_MAX_HEAD)
        if head is None:
            return
        try:
            mail = parse_mail(head + b"\r\n", self._limits, authserv_id=self.cfg.authserv_id)
        except MailRefused:
            return
        allowed = {a.lower() for a in self.cfg.allow_from}
        if mail.sender not in allowed or mail.automated or \
                (self.cfg.require_authentication and mail.authenticated != "pass"):  # fmt: skip
            return
        conversation = conversation_of(mail.sender, mail.thread or mail.message_id)
        self._remember(conversation, mail)
        text = (f"Your mail \"{mail.subject or '(no subject)'}\" was not read: it is {size / 1e6:.1f} MB, and kith "
                f"reads mail up to {self.cfg.max_message_bytes / 1e6:.1f} MB. Send a smaller one (or the file "
                "another way).")  # fmt: skip
        self._tasks.spawn(self._deliver(conversation, text, threaded=True))

    async def _mark_seen(self, client: Any, uid: int) -> None:
        if self.cfg.mark_seen:
            with contextlib.suppress(aioimaplib.AioImapException, TimeoutError):
                await self._imap(client.uid("store", str(uid), "+FLAGS.SILENT (\\Seen)"))

    async def _handle(self, uid: int, raw: bytes, arrived: datetime | None) -> None:
        slots = self._slots
        try:
            message = await self._message(uid, raw, arrived)
            if message is not None:
                await self._turn(message)
        except asyncio.CancelledError:
            # Stopped mid-turn (shutdown, a reconnect): not handled, so the mark stays below it and the
            # next run fetches it again (the host persists its dedupe key only with a stored reply).
            raise
        except Exception:
            await self._finish(uid)  # a turn that failed is not retried forever
            raise
        else:
            await self._finish(uid)
        finally:
            slots.release()
            for key in [k for k in self._files if k.startswith(f"{self._uidvalidity}:{uid}:")]:
                del self._files[key]

    async def _message(self, uid: int, raw: bytes, arrived: datetime | None) -> InboundMessage | None:
        try:
            mail = await asyncio.to_thread(parse_mail, raw, self._limits, authserv_id=self.cfg.authserv_id)
        except MailRefused as exc:
            self.stats["refused"] += 1
            log.warning("email: mail UID %d refused: %s", uid, exc)
            return None
        if mail.sender == self._address:
            return None
        if mail.automated:
            self.stats["automated"] += 1
            log.info("email: mail UID %d not answered: %s", uid, mail.automated)
            return None
        if self.cfg.require_authentication and mail.authenticated != "pass":
            self.stats["unauthenticated"] += 1
            log.warning("email: mail UID %d from an unauthenticated sender refused (%s)", uid, mail.authenticated)
            return None
        return self.normalize(uid, mail, arrived)

    def normalize(self, uid: int, mail: ParsedMail, arrived: datetime | None = None) -> InboundMessage | None:
        attachments = []
        for i, file in enumerate(mail.files):
            key = f"{self._uidvalidity}:{uid}:{i}"
            self._files[key] = file.data
            attachments.append(Attachment(kind=kind_of(file.mime_type), name=file.name, mime_type=file.mime_type,
                                          size=len(file.data), platform_id=key))  # fmt: skip
        if not mail.text and not attachments:
            return None
        thread = mail.thread or f"<uid-{self._uidvalidity}-{uid}@{self._address}>"
        conversation = conversation_of(mail.sender, thread)
        self._remember(conversation, mail)
        self.stats["turns"] += 1
        return InboundMessage(
            channel=self.name, account_id=mail.sender, conversation_id=conversation, kind=ConversationKind.DM,
            display_name=mail.sender_name, text=mail.text, message_id=f"{self._uidvalidity}:{uid}",
            timestamp=min(arrived, datetime.now(UTC)) if arrived else None, attachments=tuple(attachments),
            reply_to=mail.in_reply_to, mentioned=True,
            raw={"uid": uid, "message_id": mail.message_id, "subject": mail.subject, "thread": thread},
        )  # fmt: skip

    def _remember(self, conversation: str, mail: ParsedMail) -> None:
        refs = list(mail.references)
        if mail.in_reply_to and mail.in_reply_to not in refs:
            refs.append(mail.in_reply_to)
        if mail.message_id:
            refs.append(mail.message_id)
        self._threads.pop(conversation, None)
        self._threads[conversation] = {"to": mail.sender, "subject": mail.subject, "refs": keep_references(refs)}
        while len(self._threads) > _THREADS_KEPT:
            self._threads.pop(next(iter(self._threads)))

    async def _turn(self, message: InboundMessage) -> None:
        reply = await self.gateway.handle_inbound(message)
        if reply is None:
            return
        await self._deliver(message.conversation_id, "\n\n".join(self.reply_chunks(reply)), threaded=True)

    # --------------------------------------------------------------------------------------- media
    async def fetch_attachment(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        data = self._files.get(attachment.platform_id)
        what = f"the {attachment.kind} {attachment.name!r}" if attachment.name else f"the {attachment.kind}"
        if data is None:
            raise AttachmentUnavailable(f"{what} is no longer at hand (its mail was handled already)")
        if len(data) > max_bytes:
            raise TooLarge(f"{what} is {len(data):,} bytes, over the limit of {max_bytes:,}")
        return data

    async def send_file(self, address: ConversationAddress, *, name: str, mime_type: str, data: bytes) -> str:
        """Mail ``data`` as an attachment, in the conversation's thread when there is one; the Message-ID."""
        maintype, _, subtype = mime_type.partition("/")
        return await self._deliver(address.conversation_id, "", threaded=True,
                                   file=(name, maintype or "application", subtype or "octet-stream", data))  # fmt: skip

    # ------------------------------------------------------------------------------------ outbound
    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        await self._deliver(address.conversation_id, "\n\n".join(self.reply_chunks(reply)), threaded=False)

    async def _deliver(self, conversation: str, text: str, *, threaded: bool,
                       file: tuple[str, str, str, bytes] | None = None) -> str:  # fmt: skip
        thread = self._threads.get(conversation) if threaded else None
        to = str(thread["to"]) if thread else address_of(conversation)
        if not is_address(to):  # a conversation id from elsewhere (a linked account) is checked too
            if file is not None:
                raise AttachmentUnavailable(f"email: {conversation!r} is not an address")
            raise ValueError(f"email: {conversation!r} is not an address")
        msg = compose(self.cfg, to, text, thread=thread, file=file)
        await send_mail(self.cfg, msg, self._send_lock)
        self.stats["sent"] += 1
        if thread is not None:
            thread["refs"] = keep_references([*thread.get("refs", []), str(msg["Message-ID"])])
            await self._persist()
        return str(msg["Message-ID"])


def _arrived(line: bytes) -> datetime | None:
    found = _ARRIVED.search(line)
    try:
        return datetime.strptime(found.group(1).decode().strip(), "%d-%b-%Y %H:%M:%S %z") if found else None
    except ValueError:
        return None


async def _greeted(client: Any, cfg: EmailConfig) -> bool:
    """Greeted, and over TLS when the config asks for STARTTLS (before the login)."""
    await client.wait_hello_from_server()
    await start_tls(client, cfg)
    return True


def _write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # A temporary file per thread: a write cancelled with its task still runs in its thread, beside
    # the one the stop makes.
    tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    tmp.write_text(data)
    os.replace(tmp, path)


def _status(lines: list[Any]) -> dict[str, int]:
    """``UIDVALIDITY`` and ``UIDNEXT`` from a SELECT answer."""
    found: dict[str, int] = {}
    for line in lines:
        text = bytes(line) if isinstance(line, bytes | bytearray) else b""
        for key in ("UIDVALIDITY", "UIDNEXT"):
            m = re.search(rb"\[" + key.encode() + rb" (\d+)\]", text)
            if m:
                found[key] = int(m.group(1))
    return found
