"""Email end to end, through the real Gateway, loaded as a third party's channel is (``plugins.modules``
names ``kith_channel_email.config``; in production this package's entry points do): a real IMAP server
(pymap) and a real SMTP server (aiosmtpd), the real aioimaplib and aiosmtplib clients, the host's
access policy, dedupe, sessions, outbox and model (the Anthropic fake through the real SDK).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aioimaplib")
pytest.importorskip("pymap")
pytest.importorskip("aiosmtpd")

from test_email_adapter import AR, mail

from gateway.app import Gateway
from gateway.configread import parse_config
from gateway.schedule.engine import sync_user
from gateway.state.delivery import DeliveryPrefs
from gateway.turn.admission import AccessStore
from tests.channels.rig import FAST, TG_TOKEN, channel_plugins, wait_for
from tests.channels.test_media_e2e import last_user_content, pdf_with
from tests.fakes.anthropic import API_KEY, FakeAnthropic
from tests.fakes.imap_server import PASSWORD, USER, FakeIMAP
from tests.fakes.smtp_server import FakeSMTP
from tests.fakes.telegram_api import FakeTelegram
from tests.storage import select_rows

ADA, EVE = "ada@example.org", "eve@example.net"
SMTP_USER, SMTP_PASSWORD = "kith-smtp", "smtp-password-0123"


def email_section(imap: FakeIMAP, smtp: FakeSMTP, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "address": USER, "imap_host": "127.0.0.1", "imap_port": imap.port,
            "imap_security": "plain", "imap_password": PASSWORD, "smtp_host": "127.0.0.1", "smtp_port": smtp.port,
            "smtp_security": "plain", "smtp_user": SMTP_USER, "smtp_password": SMTP_PASSWORD, "authserv_id": AR,
            "send_rate_per_s": 1000, "send_burst": 1000, **extra}  # fmt: skip


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeIMAP, FakeSMTP]]:
    async with FakeIMAP() as imap, FakeSMTP(user=SMTP_USER, password=SMTP_PASSWORD) as smtp:
        yield imap, smtp


@pytest.fixture
async def gateway_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Gateway]]]:
    started: list[Gateway] = []

    async def start(imap: FakeIMAP, smtp: FakeSMTP, *, llm: dict[str, Any] | None = None,
                    channels: dict[str, Any] | None = None, **email: Any) -> Gateway:  # fmt: skip
        data = {"data_dir": str(tmp_path / "data"), "llm": llm or {"provider": "echo"}, "server": {"port": 0},
                "plugins": {"entry_points": False, "modules": ["kith_channel_email.config"]},
                "channels": {"email": email_section(imap, smtp, **email), **(channels or {})}}  # fmt: skip
        gw = Gateway(parse_config(data, env={}), plugins=channel_plugins(), entry_points=False)
        gw.supervisor.base_delay = 0.1
        gw.supervisor.max_delay = 0.5
        started.append(gw)
        await gw.__aenter__()
        adapter = gw.adapters["email"]
        await asyncio.wait_for(adapter.ready.wait(), 15)  # type: ignore[attr-defined]
        await wait_for(lambda: adapter.idling, what="the email adapter idling")  # type: ignore[attr-defined]
        return gw

    yield start
    for gw in started:
        await gw.close()


def user_turns(gw: Gateway) -> list[str]:
    return [r[0] for r in select_rows(gw.state, "SELECT content FROM turns WHERE role='user' ORDER BY rowid")]


async def test_an_allowed_sender_reaches_the_model_and_the_answer_is_threaded(servers, gateway_factory) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    model = await FakeAnthropic().start()
    try:
        gw = await gateway_factory(imap, smtp, dm_policy="allowlist", allow_from=[ADA],
                                   llm={"provider": "anthropic", "api_key": API_KEY, "base_url": model.base_url,
                                        "max_retries": 0})  # fmt: skip
        await imap.deliver(mail("Remember this: my cat is called Miso.\n\nOn Sat kith wrote:\n> earlier words",
                                msgid="<t1@example.org>"))  # fmt: skip
        (got,) = await smtp.wait_received(1)
        sent = json.dumps(model.last_turn())
        assert "Miso" in sent and "earlier words" not in sent  # the quote never reached the model
        reply = got.message
        assert got.rcpt_tos == [ADA] and reply["In-Reply-To"] == "<t1@example.org>" and reply["Subject"] == "Re: Plans"
        assert smtp.logins == [SMTP_USER]
        await imap.deliver(mail("What is my cat called?", msgid="<t2@example.org>",
                                headers={"In-Reply-To": reply["Message-ID"],
                                         "References": f"<t1@example.org> {reply['Message-ID']}"}))  # fmt: skip
        second = (await smtp.wait_received(2))[1].message
        assert "Miso" in json.dumps(model.last_turn())
        assert second["References"].split() == ["<t1@example.org>", reply["Message-ID"], "<t2@example.org>"]
        keys = {r[0] for r in select_rows(gw.state, "SELECT DISTINCT conversation_key FROM turns")}
        assert len(keys) == 1 and keys.pop().startswith(f"email:{ADA}#")  # one conversation per thread

        # An attached file goes through the media pipeline (its reader in the sandbox) to the model.
        doc = pdf_with("The meeting moved to Thursday at the Periwinkle room.")
        files = [("agenda.pdf", "application/pdf", doc)]
        await imap.deliver(mail("what changed?", msgid="<t3@example.org>", files=files))
        await smtp.wait_received(3)
        content = json.dumps(last_user_content(model))
        assert "Periwinkle" in content and "what changed?" in content
    finally:
        await model.stop()


async def test_a_stranger_is_refused_until_paired_and_a_restart_answers_nothing_twice(servers, gateway_factory) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    gw = await gateway_factory(imap, smtp)  # dm_policy: pairing
    await imap.deliver(mail("hello, who are you?", sender=f"Eve <{EVE}>", msgid="<e1@example.net>"))
    (coded,) = await smtp.wait_received(1)
    code = re.search(r"\b[A-Z2-9]{8}\b", coded.message.get_content())
    assert code and coded.rcpt_tos == [EVE] and user_turns(gw) == []
    await imap.deliver(mail("still me", sender=EVE, msgid="<e2@example.net>"))
    await asyncio.sleep(0.3)
    assert len(smtp.received) == 1 and user_turns(gw) == []  # a repeat within the interval gets silence
    assert AccessStore(gw.state).approve(code.group(0)) is not None  # kith pairing approve CODE
    await imap.deliver(mail("now?", sender=EVE, msgid="<e3@example.net>"))
    (_, answer) = await smtp.wait_received(2)
    assert answer.message.get_content().startswith("echo: now?") and user_turns(gw) == ["now?"]

    await gw.close()  # a restart: nothing is fetched or answered twice, what came meanwhile is
    await imap.deliver(mail("while you were away", sender=EVE, msgid="<e4@example.net>"))
    gw = await gateway_factory(imap, smtp)
    await smtp.wait_received(3)
    await asyncio.sleep(0.3)
    assert user_turns(gw) == ["now?", "while you were away"] and len(smtp.received) == 3


async def test_huge_mail_and_a_mime_bomb_are_refused_and_the_channel_keeps_serving(servers, gateway_factory) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    gw = await gateway_factory(imap, smtp, dm_policy="allowlist", allow_from=[ADA], max_message_bytes=256 * 1024)
    await imap.deliver(mail("huge", size=1024 * 1024))
    # (A bomb nested thousands deep is refused in kith's tests/channels/test_mailparse.py: pymap cannot store
    # one.)
    head = [f"Authentication-Results: {AR}; dmarc=pass", f"From: {ADA}",
            'Content-Type: multipart/mixed; boundary="b"', ""]
    parts = [f"--b\r\nContent-Type: text/plain\r\n\r\npart {i}" for i in range(500)]
    await imap.deliver("\r\n".join([*head, *parts, "--b--", ""]).encode())
    await imap.deliver(mail("a normal question"))
    sent = [d.message.get_content() for d in await smtp.wait_received(2)]
    assert any("was not read: it is 1.1 MB" in text for text in sent)  # Ada is told; nobody else would be
    assert any("a normal question" in text for text in sent) and user_turns(gw) == ["a normal question"]
    health = gw.supervisor.health()["email"]
    assert health["state"] == "running" and health["restarts"] == 0
    assert (health["too_large"], health["refused"]) == (1, 1)
    imap.drop()  # the IMAP server restarts: the supervisor reconnects after its backoff
    await wait_for(lambda: gw.supervisor.health()["email"]["restarts"] >= 1
                   and gw.supervisor.health()["email"]["state"] == "running", what="email back")  # fmt: skip
    # pymap reports mail that came between a command and IDLE only with the next change: wait for the
    # new connection to idle, as gateway_factory does after the first start.
    await wait_for(lambda: gw.adapters["email"].idling, what="the email adapter idling")  # type: ignore[attr-defined]
    await imap.deliver(mail("still there?", msgid="<after@example.org>"))
    await smtp.wait_received(3)
    assert user_turns(gw) == ["a normal question", "still there?"]


async def test_a_reminder_reaches_email_as_the_preferred_channel(servers, gateway_factory) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    gw = await gateway_factory(imap, smtp, dm_policy="allowlist", allow_from=[ADA])
    await imap.deliver(mail("hello"))
    await smtp.wait_received(1)
    ada = gw.identities.lookup("email", ADA)
    assert ada is not None
    gw.state.outbox.set_prefs(ada, DeliveryPrefs(preferred_channel="email"))
    due = (datetime.now(UTC) + timedelta(seconds=1)).replace(microsecond=0)
    store = gw.memory_store(ada)
    store.write("REMINDERS.md", f"# Reminders\n\n- [ ] {due:%Y-%m-%d %H:%M} (UTC) water the plants <!-- reminder "
                f"id=r0e01 due={due:%Y-%m-%dT%H:%M:%SZ} -->\n", source="test")  # fmt: skip
    await sync_user(gw, ada, ("REMINDERS.md",))
    reminder = (await smtp.wait_received(2, timeout=20))[1]
    assert reminder.rcpt_tos == [ADA] and "water the plants" in reminder.message.get_content()


async def test_kith_doctor_signs_in_to_imap_and_smtp(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from gateway.ops.doctor import check_channels

    imap, smtp = servers

    def config(**extra: Any) -> Any:
        return parse_config({"data_dir": str(tmp_path), "plugins": {"entry_points": False,
                             "modules": ["kith_channel_email.config"]},
                             "channels": {"email": email_section(imap, smtp, **extra)}}, env={})  # fmt: skip

    imap_ok, smtp_ok = await check_channels(config())
    assert imap_ok.name == smtp_ok.name == "channel email"
    assert imap_ok.status == "ok" and "signed in as kith@example.org, INBOX (IDLE)" in imap_ok.detail
    assert (smtp_ok.status, smtp_ok.detail) == ("ok", f"SMTP 127.0.0.1:{smtp.port} answers (plain, signed in)")
    imap_bad, smtp_bad = await check_channels(config(imap_password="wrong", smtp_password="wrong"))
    assert imap_bad.status == "fail" and "refused the login of kith@example.org" in imap_bad.detail
    assert smtp_bad.status == "fail" and f"refused the login of {SMTP_USER}" in smtp_bad.detail
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    gone, _ = await check_channels(config(imap_port=closed))
    assert (gone.status, gone.detail) == ("fail", f"IMAP 127.0.0.1:{closed} unreachable (ConnectionRefusedError)")
    unsafe = (await check_channels(config(require_authentication=False)))[0]
    assert unsafe.status == "warn" and "From is not authenticated" in unsafe.detail


def _confirm(text: str) -> str:
    found = re.search(r"/link confirm ([A-Z0-9]{4})\b", text)
    assert found, text
    return f"/link confirm {found.group(1)}"


async def test_one_person_on_telegram_and_email_has_one_memory(servers, gateway_factory) -> None:  # type: ignore[no-untyped-def]
    imap, smtp = servers
    model = await FakeAnthropic().start()
    tg = FakeTelegram(token=TG_TOKEN)
    await tg.start()
    try:
        telegram = {"enabled": True, "token": TG_TOKEN, "base_url": tg.base_url, "poll_timeout_s": 1,
                    "dm_policy": "allowlist", "allow_from": ["1001"], **FAST}  # fmt: skip
        gw = await gateway_factory(imap, smtp, dm_policy="allowlist", allow_from=[ADA], channels={"telegram": telegram},
                                   llm={"provider": "anthropic", "api_key": API_KEY, "base_url": model.base_url,
                                        "max_retries": 0})  # fmt: skip
        await asyncio.wait_for(gw.adapters["telegram"].ready.wait(), 10)  # type: ignore[attr-defined]
        await tg.push(tg.make_update(user_id=1001, text="/link"))
        code = re.search(r"link code is ([A-Z0-9-]+)", (await tg.wait_sent(1))[-1].text)
        assert code
        thread = "<link1@example.org>"
        await imap.deliver(mail(f"/link {code.group(1).rstrip('.')}", msgid=thread))
        asked = (await smtp.wait_received(1))[0].message
        told = (await tg.wait_sent(2))[-1].text
        await tg.push(tg.make_update(user_id=1001, text=_confirm(told)))
        await tg.wait_sent(3)
        answer = {"In-Reply-To": asked["Message-ID"], "References": f"{thread} {asked['Message-ID']}"}
        await imap.deliver(mail(_confirm(asked.get_content()), msgid="<link2@example.org>", headers=answer))
        linked = (await smtp.wait_received(2))[1].message
        assert "Linked" in linked.get_content() and linked["In-Reply-To"] == "<link2@example.org>"
        assert len({r[0] for r in select_rows(gw.state, "SELECT user_id FROM identities")}) == 1

        await tg.push(tg.make_update(user_id=1001, text="Remember this: my cat is called Miso."))
        await tg.wait_sent(5)
        await imap.deliver(mail("What is my cat called?", msgid="<q@example.org>"))
        await smtp.wait_received(3)
        assert "Miso" in json.dumps(model.last_turn())  # told on Telegram, asked by mail
        assert len({r[0] for r in select_rows(gw.state, "SELECT DISTINCT user_id FROM turns")}) == 1
    finally:
        await tg.close()
        await model.stop()
