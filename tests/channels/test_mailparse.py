"""Reading one mail (gateway/mailparse.py, shared by the email channel and the mail tools): the sender
and whether the server vouched for them, the thread, the new text without quotes and signature, HTML
as text, files, and the limits that refuse a MIME bomb before it is walked."""

from __future__ import annotations

import random
import time
from email.message import EmailMessage

import pytest

from gateway.mailparse import (
    MailLimits,
    MailRefused,
    authentication,
    html_to_text,
    is_address,
    parse_mail,
    strip_reply,
)

LIMITS = MailLimits()
AR = "mx.example.org"


def mail(text: str = "hello", *, sender: str = "Ada Lovelace <Ada@Example.org>", html: str = "",
         headers: dict[str, str] | None = None,
         files: list[tuple[str, str, bytes]] | None = None) -> bytes:  # fmt: skip
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = "kith@example.org"
    msg["Subject"] = "Plans"
    msg["Message-ID"] = "<m2@example.org>"
    msg["Date"] = "Sun, 29 Nov 2026 06:00:00 +0000"
    for key, value in (headers or {}).items():
        msg[key] = value
    msg.set_content(text)
    if html:
        msg.add_alternative(html, subtype="html")
    for name, ctype, data in files or []:
        main, sub = ctype.split("/")
        msg.add_attachment(data, maintype=main, subtype=sub, filename=name)
    return msg.as_bytes()


def test_sender_thread_and_text() -> None:
    got = parse_mail(mail("Can we meet on Friday?", headers={
        "In-Reply-To": "<m1@kith.test>", "References": "<root@example.org> <m1@kith.test>",
        "Authentication-Results": f"{AR}; dkim=pass header.d=example.org; spf=pass smtp.mailfrom=ada@example.org"}),
        LIMITS, authserv_id=AR)  # fmt: skip
    assert (got.sender, got.sender_name, got.subject) == ("ada@example.org", "Ada Lovelace", "Plans")
    assert got.text == "Can we meet on Friday?" and got.authenticated == "pass" and not got.automated
    assert got.thread == "<root@example.org>" and got.in_reply_to == "<m1@kith.test>"
    assert got.date is not None and got.date.year == 2026


def test_quoted_reply_and_signature_are_cut() -> None:
    body = ("Yes, Friday works.\n\n> Shall we meet?\n> kith\n\nSee you.\n\n-- \nAda Lovelace\nAnalytical Engines Ltd\n")
    assert strip_reply(body) == "Yes, Friday works.\n\nSee you."
    gmail = "Sounds good!\n\nOn Sat, 28 Nov 2026 at 10:00, kith <kith@example.org> wrote:\n> old text\n"
    assert strip_reply(gmail) == "Sounds good!"
    split = "Fine.\nOn Sat, 28 Nov 2026 at 10:00, kith <kith@example.org>\nwrote:\n> old\n"
    assert strip_reply(split) == "Fine."
    outlook = "Thanks\n\nFrom: kith <kith@example.org>\nSent: Saturday\nTo: Ada\nSubject: x\n\nold text"
    assert strip_reply(outlook) == "Thanks"
    assert strip_reply("Danke!\n\nAm 28.11.2026 um 10:00 schrieb kith <kith@example.org>:\n> alt") == "Danke!"
    assert strip_reply("ok\n\nSent from my iPhone") == "ok"


def test_html_only_mail_is_read_as_text_without_its_quote() -> None:
    html = ("<html><head><style>p{color:red}</style></head><body><p>Hello <b>there</b></p><ul><li>one</li></ul>"
            "<div class='gmail_quote'>On Sat kith wrote:<blockquote>secret old text</blockquote></div>"
            "<script>alert(1)</script></body></html>")  # fmt: skip
    msg = EmailMessage()
    msg["From"] = "ada@example.org"
    msg.set_content(html, subtype="html")
    got = parse_mail(msg.as_bytes(), LIMITS)
    assert got.text == "Hello there\n\n- one" and "secret" not in got.text and "alert" not in got.text
    assert html_to_text("a<br>b") == "a\nb"


def test_plain_part_preferred_and_files_kept() -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    got = parse_mail(mail("see attached", html="<p>see <i>attached</i></p>",
                          files=[("chart.png", "image/png", png), ("notes.pdf", "application/pdf", b"%PDF-1.4")]),
                     LIMITS)  # fmt: skip
    assert got.text == "see attached"
    assert [(f.name, f.mime_type, f.data) for f in got.files] == [("chart.png", "image/png", png),
                                                                 ("notes.pdf", "application/pdf", b"%PDF-1.4")]


def test_machines_are_recognised() -> None:
    assert parse_mail(mail(headers={"Auto-Submitted": "auto-replied"}), LIMITS).automated
    assert parse_mail(mail(headers={"Precedence": "bulk"}), LIMITS).automated
    assert parse_mail(mail(headers={"List-Id": "<list.example.org>"}), LIMITS).automated
    assert parse_mail(mail(sender="MAILER-DAEMON@example.org"), LIMITS).automated
    assert not parse_mail(mail(headers={"Auto-Submitted": "no"}), LIMITS).automated


@pytest.mark.parametrize(("results", "verdict"), [
    ("dmarc=pass header.from=example.org", "pass"),
    ("dkim=pass header.d=mail.example.org", "pass"),  # relaxed alignment: a subdomain
    ("spf=pass smtp.mailfrom=bounce@example.org", "pass"),
    ("dkim=pass header.d=evil.test; spf=pass smtp.mailfrom=x@evil.test", "fail: dkim=pass, spf=pass"),
    ("dkim=fail header.d=example.org; spf=softfail", "fail: dkim=fail, spf=softfail"),
    ("dmarc=pass header.from=evil.test", "fail: dmarc=pass"),
])  # fmt: skip
def test_authentication_results_of_the_trusted_server_only(results: str, verdict: str) -> None:
    assert authentication([f"{AR}; {results}"], AR, "ada@example.org") == verdict
    # The sender's own header below (or with another id) is not believed.
    forged = f"{AR}; dmarc=pass"
    assert authentication([f"{AR} 1; {results}", forged], AR, "ada@example.org") == verdict
    assert authentication(["evil.test; dmarc=pass", f"other.test; {results}"], AR, "ada@example.org") == "none"
    assert authentication([f"{AR}; dmarc=pass"], "", "ada@example.org") == "none"


def test_bad_senders_are_refused() -> None:
    for sender in ("", "not an address", "a@b.test, c@d.test", "<@>", "x@" + "y" * 300 + ".test"):
        with pytest.raises(MailRefused):
            parse_mail(mail(sender=sender) if sender else b"Subject: x\r\n\r\nbody", LIMITS)


def test_a_mime_bomb_is_refused_quickly() -> None:
    parts = [f"--b\r\nContent-Type: text/plain\r\n\r\npart {i}" for i in range(5000)]
    head = ["From: ada@example.org", 'Content-Type: multipart/mixed; boundary="b"', ""]
    wide = "\r\n".join([*head, *parts, "--b--", ""])
    deep = ["From: ada@example.org"]
    for i in range(3000):
        deep += [f'Content-Type: multipart/mixed; boundary="b{i}"', "", f"--b{i}"]
    started = time.process_time()
    for raw in (wide, "\r\n".join(deep)):
        with pytest.raises(MailRefused, match="MIME parts"):
            parse_mail(raw.encode(), LIMITS)
    nested = ["From: ada@example.org"]
    for i in range(12):  # few parts, too deep
        nested += [f'Content-Type: multipart/mixed; boundary="n{i}"', "", f"--n{i}"]
    with pytest.raises(MailRefused, match="nested deeper"):
        parse_mail("\r\n".join([*nested, "Content-Type: text/plain", "", "hi"]).encode(), LIMITS)
    assert time.process_time() - started < 0.5
    with pytest.raises(MailRefused, match="attachments"):
        parse_mail(mail(files=[(f"f{i}.txt", "text/plain", b"x") for i in range(11)]), LIMITS)


def test_long_text_is_cut() -> None:
    got = parse_mail(mail("word " * 10_000), MailLimits(max_text_chars=100))
    assert len(got.text) < 200 and got.text.endswith("cut off]")


def test_addresses_are_plain() -> None:
    assert is_address("ada.lovelace+kith@mail.example.org")
    for bad in ("ada@example.org\n", "ada@example.org\r\nBcc: eve@example.net", "ada", "a b@example.org",
                "ada@-example.org", "ada@example", '"ada"@example.org', "x" * 65 + "@example.org"):
        assert not is_address(bad), bad


def _mutations(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    base = mail("Can we meet?\n\n> quoted\n-- \nsig", html="<p>Can <b>we</b> meet?</p>",
                headers={"Authentication-Results": f"{AR}; dmarc=pass", "References": "<a@b> <c@d>"},
                files=[("a.png", "image/png", b"\x89PNG" + bytes(64)), ("b.txt", "text/plain", b"notes")])
    out = []
    for _ in range(count):
        raw = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(raw))
            op = rng.random()
            if op < 0.4:
                raw[i] = rng.randrange(256)
            elif op < 0.7:
                del raw[i : i + rng.randint(1, 40)]
            else:
                raw[i:i] = rng.choice([b"\r\n", b"--", b"Content-Type: multipart/mixed; boundary=x\r\n", b"=?utf-8?b?",
                                       b"\x00", b"\xff\xfe", b";", b"<", b">", b"\r\n\r\n", b"=\r\n"])
        out.append(bytes(raw))
    return out


def _read_all(mails: list[bytes]) -> None:
    for raw in mails:
        try:
            got = parse_mail(raw, LIMITS, authserv_id=AR)
        except MailRefused:
            continue
        assert is_address(got.sender) and len(got.text) <= LIMITS.max_text_chars + 50
        assert len(got.files) <= LIMITS.max_attachments


def test_mutated_mail_is_read_or_refused_never_a_crash() -> None:
    _read_all(_mutations(30, 150))


@pytest.mark.fuzz
def test_ten_thousand_mutated_mails() -> None:
    _read_all(_mutations(3030, 10_000))
