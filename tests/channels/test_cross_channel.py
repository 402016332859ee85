"""Issue 30's acceptance line: the same person on WhatsApp, Matrix and email, through the real Gateway.

She links her three accounts with ``/link`` (a code on one channel, redeemed on another, then the
two-sided confirmation: each side confirms the code the other side was shown), and from then on she is
one person: one identity, one memory, one direct session that each channel continues. Nothing of
kith's is replaced: WhatsApp runs against the Graph API fake (webhooks signed as Meta signs them),
Matrix against the homeserver fake through mautrix, email against a real IMAP server (pymap) and a
real SMTP server (aiosmtpd) through aioimaplib and aiosmtplib, and the model is the Anthropic fake
through the real SDK.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import aiohttp
import pytest

pytest.importorskip("mautrix")
pytest.importorskip("kith_channel_email")
pytest.importorskip("pymap")
pytest.importorskip("aiosmtpd")

from gateway.app import Gateway
from gateway.configread import parse_config
from tests.channels.rig import FAST, channel_plugins, wait_for
from tests.fakes.anthropic import API_KEY, FakeAnthropic
from tests.fakes.imap_server import PASSWORD, USER, FakeIMAP
from tests.fakes.matrix_hs import FakeHomeserver
from tests.fakes.smtp_server import FakeSMTP
from tests.fakes.whatsapp_graph import FakeGraph
from tests.storage import select_rows

MX_TOKEN = "syt_cross_token"
WA_TOKEN, WA_SECRET = "EAAG-cross", "cross-app-secret-0123456789"
ADA_WA = "4915112345678"
ADA_MX, ADA_MX_DM = "@ada:fake.test", "!ada-dm:fake.test"
ADA_MAIL = "ada@example.org"
AR = "mx.example.org"  # the authserv-id of the mail server's Authentication-Results
EMAIL_MODULE = "kith_channel_email.config"
MODULES = ["adapters.matrix_config", "adapters.whatsapp_config", EMAIL_MODULE]


class Side:
    """One of Ada's accounts: what she says there, and what kith has said to her there, in order."""

    def __init__(self, say: Callable[[str], Awaitable[None]], said: Callable[[], list[str]]) -> None:
        self._say, self._said = say, said

    async def say(self, text: str) -> str:
        """Say ``text`` and wait for kith's answer."""
        n = len(self._said())
        await self._say(text)
        return (await self.heard(n + 1))[-1]

    async def send(self, text: str) -> None:
        await self._say(text)

    def count(self) -> int:
        return len(self._said())

    async def heard(self, count: int, timeout: float = 15.0) -> list[str]:
        await wait_for(lambda: len(self._said()) >= count, timeout, f"{count} messages to Ada")
        return self._said()


@dataclass
class Ada:
    gw: Gateway
    wa: FakeGraph
    mx: FakeHomeserver
    imap: FakeIMAP
    smtp: FakeSMTP
    mails: int = 0

    def __post_init__(self) -> None:
        self.whatsapp = Side(self._wa_say, lambda: [str(m["text"]["body"]) for m in self.wa.sent])
        self.matrix = Side(self._mx_say, lambda: [str(m["content"]["body"]) for m in self.mx.sent])
        self.email = Side(self._mail, lambda: [str(d.message.get_content()) for d in self.smtp.received])

    async def _wa_say(self, text: str) -> None:
        body = json.dumps(self.wa.event(self.wa.text(ADA_WA, text))).encode()
        async with aiohttp.ClientSession() as http:
            status = await self.wa.post(http, f"http://127.0.0.1:{self.gw.port}/whatsapp/webhook", body,
                                        secret=WA_SECRET)  # fmt: skip
        assert status == 200

    async def _mx_say(self, text: str) -> None:
        await self.mx.say(ADA_MX_DM, ADA_MX, text)

    async def _mail(self, text: str) -> None:
        """A mail answering kith's last one (so in her one thread), as a mail client writes it."""
        self.mails += 1
        msg = EmailMessage()
        msg["Authentication-Results"] = f"{AR}; dmarc=pass"
        msg["From"] = f"Ada <{ADA_MAIL}>"
        msg["To"] = USER
        msg["Message-ID"] = f"<ada{self.mails}@example.org>"
        if self.smtp.received:
            last = self.smtp.received[-1].message
            assert self.smtp.received[-1].rcpt_tos == [ADA_MAIL]
            msg["Subject"] = last["Subject"]
            msg["In-Reply-To"] = last["Message-ID"]
            msg["References"] = f"{last['References'] or ''} {last['Message-ID']}".strip()
        else:
            msg["Subject"] = "Hello"
        msg.set_content(text)
        await self.imap.deliver(msg.as_bytes())

    def user_ids(self, table: str) -> set[str]:
        return {r[0] for r in select_rows(self.gw.state, f"SELECT DISTINCT user_id FROM {table}")}


@pytest.fixture
async def ada_factory(tmp_path: Path) -> AsyncIterator[Callable[[str], Awaitable[Ada]]]:
    closers: list[Callable[[], Awaitable[Any]]] = []

    async def start(model_url: str) -> Ada:
        wa, mx = FakeGraph(token=WA_TOKEN), FakeHomeserver(token=MX_TOKEN)
        imap, smtp = FakeIMAP(), FakeSMTP()
        for fake in (wa, mx, imap, smtp):
            await fake.start()
            closers.append(fake.close)
        await mx.direct({ADA_MX: [ADA_MX_DM]})
        allow = {"dm_policy": "allowlist", **FAST}
        data = {
            "data_dir": str(tmp_path / "data"), "server": {"port": 0},
            "llm": {"provider": "anthropic", "api_key": API_KEY, "base_url": model_url, "max_retries": 0},
            "plugins": {"entry_points": False, "modules": MODULES},
            "channels": {
                "whatsapp": {"enabled": True, "access_token": WA_TOKEN, "phone_number_id": wa.phone_number_id,
                             "app_secret": WA_SECRET, "verify_token": "v", "graph_base": wa.graph_base,
                             "allow_from": [ADA_WA], **allow},
                "matrix": {"enabled": True, "homeserver": mx.base_url, "access_token": MX_TOKEN, "sync_timeout_s": 1,
                           "allow_from": [ADA_MX], **allow},
                "email": {"enabled": True, "address": USER, "imap_host": "127.0.0.1", "imap_port": imap.port,
                          "imap_security": "plain", "imap_password": PASSWORD, "smtp_host": "127.0.0.1",
                          "smtp_port": smtp.port, "smtp_security": "plain", "smtp_password": "", "authserv_id": AR,
                          "allow_from": [ADA_MAIL], **allow},
            },
        }  # fmt: skip
        gw = Gateway(parse_config(data, env={}), plugins=channel_plugins(), entry_points=False)
        closers.insert(0, gw.close)
        await gw.__aenter__()
        await wait_for(lambda: all(gw.supervisor.health()[n]["state"] == "running"
                                   for n in ("whatsapp", "matrix", "email")), what="adapters running")  # fmt: skip
        email = gw.adapters["email"]
        await asyncio.wait_for(email.ready.wait(), 15)  # type: ignore[attr-defined]
        await wait_for(lambda: email.idling, what="the email adapter idling")  # type: ignore[attr-defined]
        return Ada(gw=gw, wa=wa, mx=mx, imap=imap, smtp=smtp)

    yield start
    for close in closers:
        await close()


def _code(text: str) -> str:
    found = re.search(r"link code is ([A-Z0-9-]+)", text)
    assert found, text
    return found.group(1).rstrip(".")


def _confirm(text: str) -> str:
    found = re.search(r"/link confirm ([A-Z0-9]{4})\b", text)
    assert found, text
    return f"/link confirm {found.group(1)}"


async def link(issuer: Side, redeemer: Side) -> None:
    """``/link`` on one side, the code redeemed on the other, then the two-sided confirmation: each
    side confirms with the code only it was shown (docs/security.md, "Linking and user merges")."""
    n = issuer.count()
    code = _code(await issuer.say("/link"))
    asked = await redeemer.say(f"/link {code}")
    told = (await issuer.heard(n + 2))[-1]  # the issuing side is shown who wants to link, and its own code
    assert _confirm(asked) != _confirm(told)
    assert "Linked" not in await issuer.say(_confirm(told))  # one side's word is not enough
    assert "Linked" in await redeemer.say(_confirm(asked))
    assert "Linked" in (await issuer.heard(n + 4))[-1]  # and the issuing side is told


@pytest.mark.long  # three channels, two links, a merge indexed: 30-40 s here
async def test_one_person_on_whatsapp_matrix_and_email_is_one_memory_and_one_session(ada_factory) -> None:  # type: ignore[no-untyped-def]
    model = await FakeAnthropic().start()
    try:
        ada: Ada = await ada_factory(model.base_url)
        # Before linking, three strangers: three identities, and nothing told on one reaches another.
        await ada.matrix.say("Remember this: my cat is called Miso.")
        await ada.whatsapp.say("What is my cat called?")
        assert "Miso" not in json.dumps(model.last_turn())
        assert len(ada.user_ids("turns")) == 2

        await link(ada.whatsapp, ada.matrix)
        await link(ada.matrix, ada.email)
        assert len(ada.user_ids("identities")) == 1
        (linked_at,) = select_rows(ada.gw.state, "SELECT MAX(seq) FROM turns")[0]
        await ada.gw.settle()  # the merged memory is indexed in the background

        # One memory: told on Matrix before the link, asked by mail and on WhatsApp after it.
        await ada.email.say("What is my cat called?")
        assert "Miso" in json.dumps(model.last_turn())
        await ada.whatsapp.say("And what did I ask you by mail?")
        assert "What is my cat called?" in json.dumps(model.last_turn())  # the mail's turn is in this history
        await ada.matrix.say("Thanks, that is all.")
        assert "And what did I ask you by mail?" in json.dumps(model.last_turn())

        # One direct session: each channel's turns continue the one the others wrote to.
        sessions = select_rows(ada.gw.state, "SELECT DISTINCT session_id, user_id FROM turns WHERE seq > ?",
                               linked_at or 0)  # fmt: skip
        assert len(sessions) == 1
        (session_id, user_id), ada_id = sessions[0], ada.user_ids("identities").pop()
        assert user_id == ada_id
        channels = {r[0] for r in select_rows(ada.gw.state, "SELECT DISTINCT channel FROM turns WHERE session_id=?",
                                              session_id)}  # fmt: skip
        assert channels == {"whatsapp", "matrix", "email"}
    finally:
        await model.stop()
