"""Issue 32's credentials line, whole, in one test: "a canary password is found in no log, export,
prompt or index, and `kith users delete` removes it".

Alice connects a calendar (a real Radicale server) and a mailbox (real IMAP and SMTP servers) in the
web chat (kith's WebSocket channel), each with its own canary password, and uses them: the model lists
and changes her calendar, lists, reads and sends mail (after she presses Approve on the card), and her
briefing reads both. Every log record of the process, at DEBUG from the root logger down, goes to a
file the test owns. Then her export is made with ``kith users export``, and everything is searched
byte by byte for each canary, and for the forms a password takes on the wire (HTTP Basic, SASL PLAIN,
SMTP AUTH LOGIN: base64):

- the log file, and what the CLI printed;
- every file of the export archive, unpacked;
- every request the model received (chat turns and background jobs), with its headers, and every
  frame the chat showed her;
- every file of the data dir (state database and its WAL, vector index, job bus, memory files, the
  person's files): found in none, the two encrypted credential files included, which decrypt to them.

Then ``kith users delete`` and the same search of the whole data dir finds nothing, and the
encrypted files are gone.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import tarfile
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.app import Gateway
from gateway.cli.main import main
from gateway.configread import load_config
from tests.conftest import WSClient
from tests.fakes.anthropic import API_KEY, FakeAnthropic
from tests.fakes.imap_server import USER, FakeIMAP
from tests.fakes.kinds import TURN
from tests.fakes.radicale_server import radicale_server
from tests.fakes.smtp_server import FakeSMTP

CALENDAR_CANARY = "CalCanary-7Qx9-pass"
MAIL_CANARY = "MailCanary-4Kz2-pass"
# The servers stand in for remote machines: what they log of the logins they receive is theirs, not
# kith's, and stays out of the captured log (kith's own clients, aioimaplib, aiosmtplib, httpx and
# httpcore, log into it).
SERVER_LOGGERS = ("radicale", "pymap", "mail.log", "proxyprotocol")


def needles() -> dict[str, bytes]:
    """Each canary, and what it becomes on the wire: HTTP Basic (CalDAV), SASL PLAIN (IMAP, SMTP) and
    SMTP AUTH LOGIN (the password alone), base64-encoded."""
    b64 = base64.b64encode
    found = {}
    for name, canary in (("calendar", CALENDAR_CANARY), ("mail", MAIL_CANARY)):
        found[name] = canary.lower().encode()  # compared with lower-cased bytes: indexes fold case
        found[f"{name} base64"] = b64(canary.encode())
    found["basic auth"] = b64(f"alice:{CALENDAR_CANARY}".encode())
    found["sasl plain"] = b64(f"\0{USER}\0{MAIL_CANARY}".encode())
    return found


NEEDLES = needles()
PLAIN = ("calendar", "mail")


def holds(data: bytes) -> list[str]:
    """The needles found in ``data`` (plain text case-folded, base64 exact). The zeros a preallocated
    file (the vector index's pages and WAL) ends with are left out of the search: 32 MB each."""
    data = data.rstrip(b"\0")
    low = data.lower()
    return [name for name, needle in NEEDLES.items() if needle in (low if name in PLAIN else data)]


def read(path: Path) -> bytes:
    return path.read_bytes()


def files_holding(root: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and not path.name.endswith(".sock"):
            hit = holds(path.read_bytes())
            if hit:
                found[str(path.relative_to(root))] = hit
    return found


class _NotTheServers(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(SERVER_LOGGERS)


@pytest.fixture
def debug_log(tmp_path: Path) -> Iterator[Path]:
    """Every record of the process at DEBUG, from the root logger down, into a file of this test."""
    path = tmp_path / "debug.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.addFilter(_NotTheServers())
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    # Loggers a daemon quietens (``gateway.logs.setup_logging``: httpx, httpcore) or an earlier test
    # left above DEBUG speak here too, as do the clients' own.
    names = {"kith", "httpx", "httpcore", "aioimaplib", "aioimaplib.aioimaplib", "aiosmtplib", "asyncio"}
    names |= {name for name, lg in logging.root.manager.loggerDict.items()
              if isinstance(lg, logging.Logger) and lg.level > logging.DEBUG}
    quiet = {name: logging.getLogger(name).level for name in names if not name.startswith(SERVER_LOGGERS)}
    before = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    for name in quiet:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(before)
        for name, level in quiet.items():
            logging.getLogger(name).setLevel(level)


def write_config(tmp_path: Path, fake: FakeAnthropic) -> Path:
    """The config file both the gateway and the ``kith`` CLI read."""
    path = tmp_path / "config.yaml"
    tools = {"calendar": {"enabled": True, "allow_hosts": ["127.0.0.1"]},
             "mail": {"enabled": True, "allow_hosts": ["127.0.0.1"]}}
    data = {"data_dir": str(tmp_path / "data"), "timezone": "Europe/Berlin", "server": {"port": 0},
            "plugins": {"entry_points": False}, "identity": {"offer_timezone": False}, "tools": tools,
            "llm": {"provider": "anthropic", "api_key": API_KEY, "base_url": fake.base_url, "max_retries": 0,
                    "timeout_s": 10}}  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    return path


class WebChat:
    """Alice in kith's web chat: every message goes through the WebSocket channel, as she types it. An
    approval comes as a card (a proactive ``reply`` with buttons) before the turn's own reply."""

    def __init__(self, client: WSClient) -> None:
        self.client = client
        self.sent = 0
        self.cards: list[dict[str, Any]] = []
        self.frames: list[dict[str, Any]] = []  # everything the chat showed her

    async def say(self, text: str) -> str:
        self.sent += 1
        ref = f"canary-{self.sent}"
        await self.client.ws.send_json({"type": "message", "id": ref, "text": text})
        while True:
            frame = await self.client.recv()
            self.frames.append(frame)
            if frame.get("buttons"):
                self.cards.append(frame)
            if frame["type"] in ("reply", "error") and frame.get("id") == ref:
                assert frame["type"] == "reply", frame
                return str(frame["text"])


async def model_calls(chat: WebChat, fake: FakeAnthropic, tool: str, args: dict[str, Any]) -> str:
    fake.enqueue_tool_use(tool, args)
    fake.enqueue("ok")
    await chat.say(f"please use {tool}")
    turns = [i for i, body in enumerate(fake.requests) if fake.kind_of(body) == TURN]  # not a background job's
    (result,) = fake.tool_results(turns[-1])
    content = result["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


async def approved(chat: WebChat, asked: str) -> str:
    """Press the card's Approve button (send its command), the one for this tool call."""
    found = re.search(r"/approve ([0-9a-f]+)", asked)
    assert found is not None, asked
    (press,) = [b["command"] for b in chat.cards[-1]["buttons"] if b["label"] == "Approve"]
    assert press == f"/approve {found.group(1)}", chat.cards[-1]
    return await chat.say(press)


def kith(config: Path, *argv: str) -> int:
    return main(["-c", str(config), *argv])


async def test_a_canary_password_is_in_no_log_export_prompt_or_index_and_delete_removes_it(
        tmp_path: Path, fake_anthropic: FakeAnthropic, debug_log: Path, capsys: pytest.CaptureFixture[str],
        ws_connect: Callable[[Gateway], Awaitable[WSClient]]) -> None:
    from plugins.briefing import run_briefing
    from plugins.tools.credentials import CredentialStore

    config_path = write_config(tmp_path, fake_anthropic)
    data = tmp_path / "data"
    (tmp_path / "caldav").mkdir()
    async with FakeIMAP(password=MAIL_CANARY, idle=False) as imap, \
            FakeSMTP(user=USER, password=MAIL_CANARY) as smtp:  # fmt: skip
        await imap.deliver(b"From: Ada <ada@example.org>\r\nTo: kith@example.org\r\nSubject: Lunch?\r\n"
                           b"Message-ID: <1@example.org>\r\n\r\nShall we have lunch on Friday?\r\n")
        with radicale_server(tmp_path / "caldav", "alice", CALENDAR_CANARY) as caldav:
            gw = Gateway(load_config(str(config_path)), entry_points=False)
            await gw.__aenter__()
            try:
                chat = WebChat(await ws_connect(gw))
                alice = (await chat.client.hello("alice-laptop", "Alice"))["user_id"]
                assert (await chat.say("hello")).startswith("fake-claude heard")
                assert (await chat.say(f"/calendar connect {caldav} alice {CALENDAR_CANARY}")).startswith(
                    "Calendar connected")
                mailbox = f"imap://127.0.0.1:{imap.port} smtp://127.0.0.1:{smtp.port} {USER}"
                assert (await chat.say(f"/mail connect {mailbox} {MAIL_CANARY}")).startswith("Mailbox connected")

                asked = await model_calls(chat, fake_anthropic, "calendar_change", {
                    "action": "create", "title": "Standup", "start": "2026-11-30T09:00"})
                assert (await approved(chat, asked)).startswith("Done: Create the event 'Standup'")
                assert "Standup" in await model_calls(chat, fake_anthropic, "calendar_list",
                                                      {"start": "2026-11-30", "days": 1})
                listed = await model_calls(chat, fake_anthropic, "mail_list", {"unread": True})
                uid = re.search(r"- id (\d+) \|", listed)
                assert uid is not None, listed
                assert "lunch on Friday" in await model_calls(chat, fake_anthropic, "mail_read",
                                                              {"id": int(uid.group(1))})
                asked = await model_calls(chat, fake_anthropic, "mail_send", {
                    "to": "ada@example.org", "subject": "Re: Lunch?", "body": "Yes!", "reply_to": int(uid.group(1))})
                assert (await approved(chat, asked)).startswith("Sent to ada@example.org")
                assert len(smtp.received) == 1

                briefing = await run_briefing(gw, alice, datetime(2026, 11, 30, 6, 0, tzinfo=UTC))
                assert "09:00-10:00 Standup" in briefing and '- Ada <ada@example.org>: "Lunch?"' in briefing
                await gw.settle()
            finally:
                await gw.close()

    store = CredentialStore(data)
    secrets = sorted(p.relative_to(data).as_posix() for p in data.rglob("*.enc"))
    assert secrets == [f"users/{alice}/.credentials/calendar.enc", f"users/{alice}/.credentials/mail.enc"]
    assert (store.get(alice, "calendar") or {}).get("password") == CALENDAR_CANARY, "encrypted, not lost"
    assert (store.get(alice, "mail") or {}).get("password") == MAIL_CANARY

    archive = tmp_path / "alice.tar.gz"
    capsys.readouterr()
    assert await asyncio.to_thread(kith, config_path, "users", "export", alice, "-o", str(archive)) == 0
    printed = capsys.readouterr()
    assert any(isinstance(h, logging.FileHandler) for h in logging.getLogger().handlers), "still captured"

    # The search.
    log = read(debug_log)
    assert b"kith.tools.mail" in log and b"aioimaplib" in log and b"LOGIN" in log, "the log is really captured"
    assert holds(log) == [], [line for line in log.splitlines() if holds(line)][:5]
    assert holds((printed.out + printed.err).encode()) == []
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    assert any(name.endswith("USER.md") or "sessions/" in name for name in members), sorted(members)[:20]
    assert {name: holds(raw) for name, raw in members.items() if holds(raw)} == {}
    assert not any(".credentials" in name for name in members), "not even encrypted"
    assert fake_anthropic.requests, "the model was asked"
    assert holds(json.dumps([fake_anthropic.requests, fake_anthropic.headers]).encode()) == []
    assert holds(json.dumps(chat.frames).encode()) == [], "the replies never echo it"
    assert files_holding(data) == {}, "no file, the encrypted ones included, holds a password"
    assert list(data.rglob("qdrant*")) and (data / "state.sqlite").exists(), "the index and the state were searched"

    assert await asyncio.to_thread(kith, config_path, "users", "delete", alice, "--yes") == 0
    assert f"erased {alice}" in capsys.readouterr().out
    assert list(data.rglob("*.enc")) == [] and not (data / "users" / alice).exists()
    assert files_holding(data) == {}
    assert holds(read(debug_log)) == []
