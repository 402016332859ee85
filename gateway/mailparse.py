"""One received mail, read with the standard library's ``email`` package under limits: who sent it
(and whether the receiving server vouched for that), which thread it belongs to, the new text only
(quoted reply and signature cut off, HTML as text) and its files.

Everything here is untrusted input. The raw mail is already bounded by the adapter (``RFC822.SIZE``
is checked before a byte is fetched); before parsing, a cheap count of ``Content-Type`` headers
refuses a MIME bomb (thousands of parts, or multiparts nested until the parser recurses itself to
death), and while walking, parts and depth are counted again. The legacy ``compat32`` policy is used
on purpose: it keeps headers as strings instead of running the modern header parser over whatever a
stranger wrote. Files are not looked into here: they go to the media pipeline, whose readers run in
the sandbox (docs/media.md). Blocking: the adapter calls ``parse_mail`` in a thread.

Public API (docs/plugins.md#the-public-api): the email channel (examples/kith-channel-email, a package
of its own) and kith's mail tools (plugins/tools/mail_tool.py) both read mail with it.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from datetime import datetime
from email.header import decode_header, make_header
from email.message import Message
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser

_ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)+$")  # fmt: skip
_MSGID = re.compile(r"<[^<>\s]{1,250}>")
_CONTENT_TYPE = re.compile(rb"(?im)^content-type:")
_MAX_HTML_CHARS = 1_000_000
_MAX_REFERENCES = 20
_ROBOTS = ("mailer-daemon", "postmaster")


class MailRefused(Exception):
    """The mail is not read at all; the message says why (for the log and, for a known sender, a notice)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MailLimits:
    max_parts: int = 64
    max_depth: int = 8
    max_attachments: int = 10
    max_text_chars: int = 20_000


@dataclass(frozen=True, slots=True)
class MailFile:
    name: str
    mime_type: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedMail:
    sender: str  # the From address, lower-cased: the account id
    sender_name: str
    message_id: str  # "<...>", or "" when the mail has none (or a malformed one)
    in_reply_to: str
    references: tuple[str, ...]
    subject: str
    date: datetime | None
    text: str  # the new text: no quoted reply, no signature
    files: tuple[MailFile, ...]
    automated: str  # why this is a machine's mail (bounce, list, auto-reply), or ""
    authenticated: str  # "pass", "fail: <why>" or "none" (no Authentication-Results of the trusted server)

    @property
    def thread(self) -> str:
        """The Message-ID the thread started with: one conversation per thread."""
        return (self.references[0] if self.references else self.in_reply_to) or self.message_id


# What the standard library's parser and decoders raise on a malformed mail (found by fuzzing:
# a Header object where a string was expected, a NUL in a file name, an unknown charset).
_MALFORMED = (ValueError, TypeError, LookupError, UnicodeError, AttributeError, IndexError, RecursionError)


def parse_mail(raw: bytes, limits: MailLimits, *, authserv_id: str = "") -> ParsedMail:
    """``raw`` (RFC 5322 bytes) read; ``MailRefused`` when it is not a mail kith reads."""
    try:
        return _parse(raw, limits, authserv_id)
    except _MALFORMED as exc:
        raise MailRefused(f"malformed mail ({type(exc).__name__})") from None


def _parse(raw: bytes, limits: MailLimits, authserv_id: str) -> ParsedMail:
    if len(_CONTENT_TYPE.findall(raw)) > limits.max_parts + 1:
        raise MailRefused(f"more than {limits.max_parts} MIME parts")
    msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    senders = [a for _, a in getaddresses([str(v) for v in msg.get_all("From", [])])]
    if len(senders) != 1 or not is_address(senders[0]):
        raise MailRefused("no single valid From address")
    sender = senders[0].lower()
    name = _header(msg, "From")
    sender_name = getaddresses([name])[0][0] if name else ""
    body, files = _walk(msg, limits)
    text = strip_reply(body)
    if len(text) > limits.max_text_chars:
        text = text[: limits.max_text_chars] + "\n[... the rest of this mail was cut off]"
    return ParsedMail(
        sender=sender, sender_name=_oneline(sender_name)[:100], message_id=_msgid(_raw(msg, "Message-ID")),
        in_reply_to=_msgid(_raw(msg, "In-Reply-To")), references=_references(_raw(msg, "References")),
        subject=_oneline(_header(msg, "Subject"))[:300], date=_date(_raw(msg, "Date")), text=text,
        files=tuple(files), automated=_automated(msg, sender),
        authenticated=authentication([str(v) for v in msg.get_all("Authentication-Results", [])], authserv_id, sender),
    )  # fmt: skip


def is_address(text: str) -> bool:
    """A plain ``local@domain`` (dot-atom local part, a host name): nothing a header could be forged with."""
    return len(text) <= 254 and _ADDRESS.fullmatch(text) is not None  # fullmatch: "$" would let a "\n" through


# ---------------------------------------------------------------------------------------- structure
def _walk(msg: Message, limits: MailLimits) -> tuple[str, list[MailFile]]:
    plain: str | None = None
    html: str | None = None
    files: list[MailFile] = []
    stack: list[tuple[Message, int]] = [(msg, 0)]
    parts = 0
    while stack:
        part, depth = stack.pop()
        parts += 1
        if parts > limits.max_parts:
            raise MailRefused(f"more than {limits.max_parts} MIME parts")
        if depth > limits.max_depth:
            raise MailRefused(f"MIME parts nested deeper than {limits.max_depth}")
        if part.is_multipart():
            children = part.get_payload()
            if isinstance(children, list):
                stack.extend((child, depth + 1) for child in reversed(children) if isinstance(child, Message))
            continue
        ctype = part.get_content_type()
        disposition = (_raw(part, "Content-Disposition") or "").split(";", 1)[0].strip().lower()
        filename = _filename(part)
        if disposition != "attachment" and not filename and ctype in ("text/plain", "text/html"):
            text = _text(part)
            if ctype == "text/plain" and plain is None:
                plain = text
            elif ctype == "text/html" and html is None:
                html = text
            continue
        if ctype.startswith("multipart/") or ctype == "application/pgp-signature":
            continue
        if len(files) >= limits.max_attachments:
            raise MailRefused(f"more than {limits.max_attachments} attachments")
        data = part.get_payload(decode=True)
        if isinstance(data, bytes) and data:
            files.append(MailFile(name=filename or _default_name(ctype, len(files)), mime_type=ctype, data=data))
    if plain is not None and plain.strip():
        return plain, files
    return (html_to_text(html) if html else plain or ""), files


def _text(part: Message) -> str:
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return data.decode(charset, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _filename(part: Message) -> str:
    try:
        name = part.get_filename() or ""
    except (ValueError, LookupError, TypeError):
        return ""
    try:
        name = str(make_header(decode_header(name)))
    except (ValueError, LookupError, UnicodeError):
        pass
    return _oneline(name).replace("/", "_").replace("\\", "_")[:200]


def _default_name(ctype: str, index: int) -> str:
    sub = ctype.split("/", 1)[-1].split("+", 1)[0] or "bin"
    return f"attachment-{index + 1}.{sub[:10]}"


# ------------------------------------------------------------------------------------------ headers
def _header(msg: Message, name: str) -> str:
    value = msg.get(name)
    if value is None:
        return ""
    try:
        return str(make_header(decode_header(str(value))))
    except (ValueError, LookupError, UnicodeError, TypeError):
        return str(value)


def _raw(msg: Message, name: str) -> str:
    """A header as a string: compat32 hands over a ``Header`` object for one with raw 8-bit bytes."""
    value = msg.get(name)
    return "" if value is None else str(value)


def _oneline(text: str) -> str:
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def _msgid(value: object) -> str:
    found = _MSGID.search(str(value or ""))
    return found.group(0) if found else ""


def _references(value: object) -> tuple[str, ...]:
    ids = _MSGID.findall(str(value or ""))
    # The first is the thread's root; the last ones are the nearest: keep both ends of a long chain.
    return tuple(ids[:1] + ids[1:][-(_MAX_REFERENCES - 1):]) if ids else ()


def _date(value: object) -> datetime | None:
    try:
        date = parsedate_to_datetime(str(value)) if value else None
    except (ValueError, TypeError, IndexError):
        return None
    return date if date is not None and date.tzinfo is not None else None


def _automated(msg: Message, sender: str) -> str:
    auto = (_raw(msg, "Auto-Submitted") or "no").strip().lower()
    if not auto.startswith("no"):
        return f"Auto-Submitted: {auto[:40]}"
    precedence = (_raw(msg, "Precedence") or "").strip().lower()
    if precedence in ("bulk", "junk", "list", "auto_reply"):
        return f"Precedence: {precedence}"
    if _raw(msg, "List-Id") or _raw(msg, "List-Unsubscribe"):
        return "a mailing list's mail"
    if (_raw(msg, "Return-Path") or "").strip() == "<>" or sender.split("@", 1)[0] in _ROBOTS:
        return "a bounce"
    return ""


def authentication(headers: list[str], authserv_id: str, sender: str) -> str:
    """What the receiving server (``authserv_id``) said about the sender (RFC 8601): ``pass`` when
    DMARC passed, or DKIM or SPF passed for a domain aligned with the From domain; ``fail: ...``
    otherwise; ``none`` when that server wrote no Authentication-Results. Only the topmost header
    with that authserv-id counts: the ones below it (or with another id) could be the sender's own."""
    if not authserv_id:
        return "none"
    domain = sender.rsplit("@", 1)[-1]
    for header in headers:
        parts = [p.strip() for p in re.sub(r"\([^()]*\)", " ", str(header)).split(";")]
        if parts[0].lower().split()[:1] != [authserv_id.lower()]:
            continue
        results: dict[str, tuple[str, dict[str, str]]] = {}
        for item in parts[1:]:
            words = item.split()
            if not words or "=" not in words[0]:
                continue
            method, _, result = words[0].partition("=")
            props = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            props = {k.lower(): v.lower().strip('"') for k, v in props.items()}
            results.setdefault(method.lower(), (result.lower(), props))
        dmarc = results.get("dmarc")
        # header.from names the From domain the server judged: another one is not this mail's From.
        if dmarc and dmarc[0] == "pass" and dmarc[1].get("header.from", domain) == domain:
            return "pass"
        dkim = results.get("dkim")
        if dkim and dkim[0] == "pass" and _aligned(dkim[1].get("header.d") or dkim[1].get("header.i", ""), domain):
            return "pass"
        spf = results.get("spf")
        if spf and spf[0] == "pass" and _aligned(spf[1].get("smtp.mailfrom", ""), domain):
            return "pass"
        said = ", ".join(f"{m}={r[0]}" for m, r in results.items()) or "no results"
        return f"fail: {said}"
    return "none"


def _aligned(identity: str, domain: str) -> bool:
    """Relaxed alignment: the same domain, or one is a subdomain of the other."""
    other = identity.rsplit("@", 1)[-1].strip(".")
    return bool(other) and (other == domain or domain.endswith("." + other) or other.endswith("." + domain))


# ------------------------------------------------------------------------------------ text and HTML
_QUOTE_HEADERS = (
    re.compile(r"^On\b.{0,200}\bwrote:\s*$", re.I),
    re.compile(r"^Am\b.{0,200}\bschrieb\b.{0,100}:\s*$", re.I),
    re.compile(r"^Le\b.{0,200}\ba écrit\s*:\s*$", re.I),
    re.compile(r"^El\b.{0,200}\bescribió:\s*$", re.I),
    re.compile(r"^Il\b.{0,200}\bha scritto:\s*$", re.I),
    re.compile(r"^Op\b.{0,200}\bschreef\b.{0,100}:\s*$", re.I),
    re.compile(r"^-{2,}\s*(Original Message|Ursprüngliche Nachricht|Message d'origine)\s*-{2,}\s*$", re.I),
    re.compile(r"^_{20,}\s*$"),  # Outlook's rule above the quoted mail
)
_OUTLOOK_HEADER = re.compile(r"^(From|Von|De):\s.+$", re.I)
_OUTLOOK_NEXT = re.compile(r"^(Sent|Gesendet|Envoyé|Date|To|An|À):\s", re.I)
_SIGNOFFS = re.compile(r"^(Sent from my .{1,40}|Get Outlook for .{1,40}|Von meinem .{1,60} gesendet)\s*$", re.I)


def strip_reply(text: str) -> str:
    """The new text of a reply: lines quoted with ``>`` dropped, everything from a quote header
    ("On <date>, <name> wrote:", Outlook's "From:/Sent:" block) or the signature delimiter ``-- ``
    on cut off. The model wrote what is quoted; it has that in the session already."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if line.rstrip("\n") in ("-- ", "--"):
            break
        if any(p.match(stripped) for p in _QUOTE_HEADERS):
            break
        # "On Mon, 1 Jan 2026 at 10:00, Ada Lovelace <ada@example.org>" + "wrote:" on the next line
        if stripped.lower().startswith("on ") and i + 1 < len(lines) and lines[i + 1].strip().lower() == "wrote:":
            break
        if _OUTLOOK_HEADER.match(stripped) and i + 1 < len(lines) and _OUTLOOK_NEXT.match(lines[i + 1].strip()):
            break
        if stripped.startswith(">"):
            continue
        kept.append(line.rstrip())
    while kept and (not kept[-1].strip() or _SIGNOFFS.match(kept[-1].strip())):
        kept.pop()
    out = "\n".join(kept).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", out)


class _HTMLText(HTMLParser):
    _SKIP = frozenset({"style", "script", "head", "title", "blockquote", "template"})
    _BLOCK = frozenset({"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "hr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._skip = 0
        self._divs = 0
        self._quote_at = -1  # div depth of a client's quote container (Gmail, Thunderbird)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag == "div":
            self._divs += 1
            classes = " ".join(v or "" for k, v in attrs if k in ("class", "id")).lower()
            if self._quote_at < 0 and ("gmail_quote" in classes or "moz-cite-prefix" in classes
                                       or "divrplyfwdmsg" in classes or "appendonsend" in classes):  # fmt: skip
                self._quote_at = self._divs
        if tag in self._BLOCK:
            self.out.append("\n")
        if tag == "li":
            self.out.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag == "div":
            if self._divs == self._quote_at:
                self._quote_at = -1
            self._divs = max(0, self._divs - 1)
        if tag in self._BLOCK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip and self._quote_at < 0:
            self.out.append(data)


def html_to_text(source: str) -> str:
    """An HTML body as the text a person reads in it, without the quoted mail the client appended."""
    parser = _HTMLText()
    parser.feed(source[:_MAX_HTML_CHARS])
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.out).splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
