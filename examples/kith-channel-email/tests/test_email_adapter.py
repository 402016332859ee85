"""The email adapter against a real IMAP server (pymap, tests/fakes/imap_server.py) and a real SMTP
server (aiosmtpd, tests/fakes/smtp_server.py), through the real aioimaplib and aiosmtplib clients:
IDLE and polling, UID progress across restarts, threading, attachments both ways, limits, senders
the server did not vouch for, and machines' mail."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aioimaplib")
pytest.importorskip("pymap")
pytest.importorskip("aiosmtpd")

from kith_channel_email.adapter import EmailAdapter, conversation_of
from kith_channel_email.config import EmailConfig
from kith_channel_email.send import compose, send_mail

from gateway.adapter import AdapterAuthError
from gateway.media.errors import TooLarge
from gateway.types import ConversationAddress, Reply
from tests.channels.rig import wait_for
from tests.channels.stub import StubGateway
from tests.fakes.imap_server import PASSWORD, USER, FakeIMAP
from tests.fakes.smtp_server import FakeSMTP

AR = "mx.example.org"
ADA = "ada@example.org"


def section(imap: FakeIMAP, smtp: FakeSMTP, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "address": USER, "imap_host": "127.0.0.1", "imap_port": imap.port,
            "imap_security": "plain", "imap_password": PASSWORD, "smtp_host": "127.0.0.1", "smtp_port": smtp.port,
            "smtp_security": "plain", "smtp_password": "", "authserv_id": AR, "poll_interval_s": 0.1, **extra}


def mail(text: str, *, sender: str = f"Ada <{ADA}>", msgid: str = "<a1@example.org>", auth: str = "dmarc=pass",
         headers: dict[str, str] | None = None, files: list[tuple[str, str, bytes]] | None = None,
         size: int = 0) -> bytes:  # fmt: skip
    msg = EmailMessage()
    msg["Authentication-Results"] = f"{AR}; {auth}"
    msg["From"] = sender
    msg["To"] = USER
    msg["Subject"] = "Plans"
    msg["Message-ID"] = msgid
    for key, value in (headers or {}).items():
        msg[key] = value
    msg.set_content(text + ("x" * size))
    for name, ctype, data in files or []:
        main, sub = ctype.split("/")
        msg.add_attachment(data, maintype=main, subtype=sub, filename=name)
    return msg.as_bytes()


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeIMAP, FakeSMTP]]:
    async with FakeIMAP() as imap, FakeSMTP() as smtp:
        yield imap, smtp


async def seen(imap: FakeIMAP, uid: int) -> None:
    for _ in range(200):
        if "\\Seen" in await imap.flags(uid):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"mail {uid} never flagged \\Seen")


async def started(gw: StubGateway) -> tuple[EmailAdapter, asyncio.Task[None]]:
    adapter = EmailAdapter(gw)  # type: ignore[arg-type]
    task = gw.start(adapter)
    await asyncio.wait_for(adapter.ready.wait(), 10)
    if adapter.cfg.idle:
        await wait_for(lambda: adapter.idling, what="the adapter idling")
    return adapter, task


async def test_a_mail_is_a_turn_and_the_answer_goes_back_in_its_thread(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    async with StubGateway.with_channels(tmp_path, email=section(imap, smtp)) as gw:
        adapter, _task = await started(gw)
        root = {"References": "<root@example.org>", "In-Reply-To": "<root@example.org>"}
        uid = await imap.deliver(mail("Can we meet on Friday?\n\n> old quote\n\n-- \nAda", headers=root))
        (msg,) = await gw.wait_inbound(1)
        assert (msg.channel, msg.account_id, msg.display_name) == ("email", ADA, "Ada")
        assert msg.text == "Can we meet on Friday?"
        assert msg.conversation_id == conversation_of(ADA, "<root@example.org>") and msg.mentioned
        assert msg.timestamp is not None and abs(time.time() - msg.timestamp.timestamp()) < 60  # the server's clock
        (got,) = await smtp.wait_received(1)
        reply = got.message
        assert got.rcpt_tos == [ADA] and reply["To"] == ADA and USER in reply["From"]
        assert reply["Subject"] == "Re: Plans" and reply["In-Reply-To"] == "<a1@example.org>"
        assert reply["References"].split() == ["<root@example.org>", "<a1@example.org>"]
        assert reply.get_content().strip() == "echo: Can we meet on Friday?"  # quotes nothing
        assert reply["Auto-Submitted"] == "auto-replied"
        await seen(imap, uid)  # flagged once taken (concurrently with the turn)
        assert adapter.stats["idle"] >= 1
        # The next mail of the thread continues its References with kith's own reply.
        await imap.deliver(mail("and Saturday?", msgid="<a2@example.org>",
                                headers={"References": f"<root@example.org> <a1@example.org> {reply['Message-ID']}",
                                         "In-Reply-To": reply["Message-ID"]}))  # fmt: skip
        second = (await gw.wait_inbound(2))[1]
        assert second.conversation_id == msg.conversation_id
        again = (await smtp.wait_received(2))[1].message
        assert again["In-Reply-To"] == "<a2@example.org>"
        assert again["References"].split()[:1] == ["<root@example.org>"]


async def test_restart_takes_up_where_it_stopped_and_history_is_not_answered(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    await imap.deliver(mail("from before kith", msgid="<old@example.org>"))
    cfg = section(imap, smtp)
    async with StubGateway.with_channels(tmp_path, email=cfg) as gw:
        adapter, task = await started(gw)
        uid = await imap.deliver(mail("one", msgid="<b1@example.org>"))
        await gw.wait_inbound(1)
        await smtp.wait_received(1)
        await wait_for(lambda: adapter.health()["last_uid"] == uid, what="the mail handled")
        await adapter.stop()
        await asyncio.wait_for(task, 10)
    saved = json.loads((tmp_path / "channels" / "email" / "state.json").read_text())
    assert saved["done_to"] == uid  # stored by the stop at the latest, so the restart skips "one"
    await imap.deliver(mail("two, while kith was down", msgid="<b2@example.org>"))
    async with StubGateway.with_channels(tmp_path, email=cfg) as gw:
        adapter, _task = await started(gw)
        got = await gw.wait_inbound(1)
        # Two messages here were "one" again: its mark was in memory, and its write was cancelled by the stop.
        assert len(got) == 1, ([(m.text, m.message_id) for m in got], imap.connections, adapter.stats)
        (msg,) = got
        assert msg.text == "two, while kith was down"
        await smtp.wait_received(2)
        await asyncio.sleep(0.3)
        assert [m.text for m in gw.inbound] == ["two, while kith was down"]  # nothing old, nothing twice


async def test_polling_when_the_server_has_no_idle(tmp_path: Path) -> None:
    async with FakeIMAP() as imap, FakeSMTP() as smtp, \
            StubGateway.with_channels(tmp_path, email=section(imap, smtp, idle=False)) as gw:  # fmt: skip
        adapter, _task = await started(gw)
        await imap.deliver(mail("polled"))
        (msg,) = await gw.wait_inbound(1)
        assert msg.text == "polled" and adapter.stats["idle"] == 0 and adapter.stats["polls"] >= 1


async def test_unvouched_machine_own_and_oversized_mail_is_not_a_turn(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    cfg = section(imap, smtp, max_message_bytes=128 * 1024, allow_from=[ADA])
    async with StubGateway.with_channels(tmp_path, email=cfg) as gw:
        adapter, _task = await started(gw)
        await imap.deliver(mail("forged", auth="dkim=fail header.d=example.org; spf=fail"))
        await imap.deliver(mail("out of office", headers={"Auto-Submitted": "auto-replied"}))
        await imap.deliver(mail("my own", sender=USER))
        huge = await imap.deliver(mail("huge", size=300 * 1024))
        head = [f"Authentication-Results: {AR}; dmarc=pass", f"From: {ADA}",
                'Content-Type: multipart/mixed; boundary="b"', ""]
        parts = [f"--b\r\nContent-Type: text/plain\r\n\r\n{i}" for i in range(300)]
        bomb = "\r\n".join([*head, *parts, "--b--", ""])
        await imap.deliver(bomb.encode())
        await imap.deliver(mail("a real one"))
        (msg,) = await gw.wait_inbound(1)
        assert msg.text == "a real one"
        stats = adapter.stats
        assert (stats["unauthenticated"], stats["automated"], stats["too_large"], stats["refused"]) == (1, 1, 1, 1)
        assert "\\Seen" in await imap.flags(huge)  # refused unread, and not fetched again
        sent = await smtp.wait_received(2)
        notice = next(d.message for d in sent if "was not read" in d.message.get_content())
        assert notice["To"] == ADA and notice["In-Reply-To"] == "<a1@example.org>"
        assert "0.3 MB" in notice.get_content() and "0.1 MB" in notice.get_content()
        await asyncio.sleep(0.2)
        assert len(smtp.received) == 2  # the notice and the answer: nothing to the others


async def test_files_in_and_out(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    photo = b"\xff\xd8\xff" + bytes(300)
    seen: dict[str, Any] = {}

    async with StubGateway.with_channels(tmp_path, email=section(imap, smtp)) as gw:
        adapter, _task = await started(gw)

        async def answer(message: Any) -> str:  # the media pipeline fetches while the turn runs
            (att,) = message.attachments
            seen["att"] = att
            seen["data"] = await adapter.fetch_attachment(att, max_bytes=1 << 20)
            with pytest.raises(TooLarge):
                await adapter.fetch_attachment(att, max_bytes=10)
            return "got it"

        gw.answer = answer
        await imap.deliver(mail("a photo", files=[("cat.jpg", "image/jpeg", photo)]))
        (msg,) = await gw.wait_inbound(1)
        await smtp.wait_received(1)
        att = seen["att"]
        assert (att.kind, att.name, att.mime_type, att.size, seen["data"]) == ("photo", "cat.jpg", "image/jpeg",
                                                                               len(photo), photo)
        address = ConversationAddress(channel="email", conversation_id=msg.conversation_id)
        await adapter.send_file(address, name="chart.png", mime_type="image/png", data=b"\x89PNG")
        sent = (await smtp.wait_received(2))[1].message
        assert sent["In-Reply-To"] and [(p.get_filename(), p.get_content()) for p in sent.iter_attachments()] == \
            [("chart.png", b"\x89PNG")]  # fmt: skip
        await adapter.send(ConversationAddress(channel="email", conversation_id=ADA), Reply(text="a reminder"))
        reminder = (await smtp.wait_received(3))[2].message
        assert reminder["Subject"] == "A message from kith" and reminder["In-Reply-To"] is None
        assert reminder["Auto-Submitted"] == "auto-generated" and "a reminder" in reminder.get_content()


async def test_smtp_temporary_failure_is_retried_and_a_refused_login_stops_the_adapter(
    servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    import kith_channel_email.send

    monkeypatch.setattr(kith_channel_email.send, "SMTP_RETRY_S", 0.01)
    imap, smtp = servers
    async with StubGateway.with_channels(tmp_path, email=section(imap, smtp)) as gw:
        adapter, _task = await started(gw)
        smtp.fail_next = 1
        await adapter.send(ConversationAddress(channel="email", conversation_id=ADA), Reply(text="retried"))
        assert len(smtp.received) == 1
    async with StubGateway.with_channels(tmp_path, email=section(imap, smtp, imap_password="wrong")) as gw:
        adapter = EmailAdapter(gw)  # type: ignore[arg-type]
        with pytest.raises(AdapterAuthError, match="refused the login"):
            await asyncio.wait_for(adapter.run(), 10)


@pytest.mark.parametrize("idle", [True, False])
async def test_a_dropped_connection_ends_run_for_the_supervisor(servers, tmp_path: Path, idle: bool) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    async with StubGateway.with_channels(tmp_path, email=section(imap, smtp, idle=idle)) as gw:
        adapter, task = await started(gw)
        imap.drop()  # the server restarts
        with pytest.raises(ConnectionError, match="closed the connection"):
            await asyncio.wait_for(task, 10)
        assert not adapter.ready.is_set()
        again = gw.start(adapter)  # what the supervisor does next, after its backoff
        await asyncio.wait_for(adapter.ready.wait(), 10)
        if idle:  # pymap announces mail that came just before IDLE only with the next change
            await wait_for(lambda: adapter.idling, what="the adapter idling")
        await imap.deliver(mail("after the restart"))
        (msg,) = await gw.wait_inbound(1)
        assert msg.text == "after the restart" and not again.done()


async def test_a_cancelled_send_ends_at_once_while_the_server_is_busy_with_the_mail(servers) -> None:  # type: ignore[no-untyped-def]
    """A restart or a shutdown cancels a reply being sent. aiosmtplib's ``async with`` then said QUIT and
    waited its 30 s timeout, since a server busy with the mail's DATA does not answer it."""
    imap, smtp = servers
    smtp.hold = asyncio.Event()
    cfg = EmailConfig.model_validate(section(imap, smtp))
    sending = asyncio.create_task(send_mail(cfg, compose(cfg, ADA, "hello", thread=None), asyncio.Lock()))
    await wait_for(lambda: smtp.holding == 1, what="the server taking the mail's DATA")
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(sending, 5)  # not the 30 s of a QUIT nobody answers
    smtp.hold.set()
    await send_mail(cfg, compose(cfg, ADA, "again", thread=None), asyncio.Lock())  # and the next send goes
    assert "again" in [d.message.get_content().strip() for d in smtp.received]


async def test_a_flood_is_taken_a_few_mails_at_a_time(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    release = asyncio.Event()
    async with StubGateway.with_channels(tmp_path, email=section(imap, smtp)) as gw:
        adapter, _task = await started(gw)

        async def slow(message: Any) -> str:
            await release.wait()
            return "ok"

        gw.answer = slow
        for i in range(10):
            await imap.deliver(mail(f"mail {i}", msgid=f"<f{i}@example.org>"))
        await gw.wait_inbound(4)
        await asyncio.sleep(0.3)
        assert len(gw.inbound) == 4 and adapter.stats["fetched"] == 4  # the rest waits on the server
        release.set()
        await gw.wait_inbound(10)
        await smtp.wait_received(10)
        saved = json.loads((tmp_path / "channels" / "email" / "state.json").read_text())
        await wait_for(lambda: json.loads((tmp_path / "channels" / "email" / "state.json").read_text())["done_to"]
                       == adapter.health()["last_uid"] == 110, what="all handled")  # fmt: skip
        assert saved["uidvalidity"] > 0


async def test_a_mail_whose_turn_was_cut_short_is_taken_again(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    cfg = section(imap, smtp)
    async with StubGateway.with_channels(tmp_path, email=cfg) as gw:
        adapter, task = await started(gw)
        gw.answer = lambda message: asyncio.Event().wait()  # type: ignore[assignment,return-value]  # never ends
        await imap.deliver(mail("interrupted"))
        (first,) = await gw.wait_inbound(1)
        await adapter.stop()  # shutdown mid-turn: the turn is cancelled
        await asyncio.wait_for(task, 10)
    async with StubGateway.with_channels(tmp_path, email=cfg) as gw:
        await started(gw)
        (again,) = await gw.wait_inbound(1)
        assert again.text == "interrupted" and again.message_id == first.message_id  # the host dedupes it if it was
        await smtp.wait_received(1)
