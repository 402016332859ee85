"""A stranger's display name cannot drive the operator's terminal or fake a line of output.

Anyone who writes to the bot chooses their display name, and ``kith pairing list`` printed it raw:
``ESC ] 0;pwned BEL`` retitled the owner's terminal and ``ESC [2J`` cleared it (other sequences can
rewrite what is shown or, on some terminals, answer into the shell). Control and format characters
are now printed as visible escapes (``\\x1b``), and chat labels (the /link prompt) drop them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gateway.cli.main import main as kith
from gateway.configread import parse_config
from gateway.turn.admission import AccessStore
from gateway.types import InboundMessage
from gateway.util.safetext import one_line, printable
from tests.conftest import GatewayFactory

EVIL = "Bob\x1b]0;pwned\x07\x1b[2J"
# Every character that would reach the terminal as a control: C0 (ESC, BEL, CR, LF, BS), DEL, C1 (CSI,
# OSC, ST as single code points) and the bidi override that reorders a line.
CONTROLS = ("\x1b", "\x07", "\r", "\n", "\x08", "\x7f", "\x9b", "\x9d", "\x9c", "\u202e")


def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data")}))
    return path


def test_pairing_list_escapes_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config_file(tmp_path)
    store = AccessStore.for_config(parse_config({"data_dir": str(tmp_path / "data")}, env={}))
    try:
        code = store.request("telegram", "1001", EVIL, ttl_s=3600, max_pending=20, reply_interval_s=600).code
        store.request("discord", "77\x1b[31m", "Eve\r\nabcd1234  telegram:42 (Alice)\x9b2J\u202eevil",
                      ttl_s=3600, max_pending=20, reply_interval_s=600)
        store.approve_account("telegram", "5", display_name="Mallory\x1b]52;c;Y3VybCBldmlsfHNo\x07", via="pairing")
    finally:
        store.close()
    assert code

    assert kith(["-c", str(cfg), "pairing", "list", "--approved"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 3 and out.endswith("\n"), "three entries, three lines: a name cannot add one"
    for ch in CONTROLS:
        assert ch not in out.replace("\n", ""), repr(ch)
    assert "Bob\\x1b]0;pwned\\x07\\x1b[2J" in out, "the operator still sees what was there"
    assert "77\\x1b[31m" in out and "\\x9b2J" in out and "\\u202eevil" in out
    assert "Mallory\\x1b]52;c;" in out

    assert kith(["-c", str(cfg), "pairing", "approve", code]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "Bob\\x1b]0;pwned" in out


def test_printable_and_one_line() -> None:
    assert printable(EVIL) == "Bob\\x1b]0;pwned\\x07\\x1b[2J"
    assert printable("a\\x1b") == "a\\\\x1b", "a literal backslash cannot pass for one of our escapes"
    assert printable("Zoë 😀 日本") == "Zoë 😀 日本", "ordinary text is untouched"
    assert one_line(EVIL) == "Bob]0;pwned[2J"
    assert one_line("a\n\tb\u200b\u202ec") == "a bc"


async def test_link_prompt_shows_names_without_controls(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()

    def dm(channel: str, account: str, text: str, name: str = "") -> InboundMessage:
        return InboundMessage(channel=channel, account_id=account, conversation_id=account, text=text,
                              trusted=True, display_name=name, timestamp=datetime.now(UTC))

    made = await gw.handle_inbound(dm("discord", "9", "/link", name=EVIL))
    assert made is not None
    asked = await gw.handle_inbound(dm("telegram", "2", f"/link {made.text.split('link code is ')[1][:8]}"))
    assert asked is not None and "“Bob]0;pwned[2J” on discord" in asked.text
    assert not any(ch in asked.text for ch in CONTROLS if ch != "\n")
