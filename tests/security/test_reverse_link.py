"""Reverse /link: sending someone else's link code must not hand them your memory.

Before issue 12, ``/link CODE`` merged the sender's whole user into the code issuer's at once, with
"Linked." as the only feedback: an attacker who made a code and talked a victim into sending it read
the victim's memory from then on. Now redeeming a code merges nothing. Each side is shown who the
other account is (display name, channel, account id masked) and which memory is kept, and each must
confirm with a short code that only it was shown; either side can cancel, and requests expire.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import gateway.identity.linking as linking
from gateway.app import Gateway
from gateway.types import InboundMessage
from tests.conftest import GatewayFactory, WSClient
from tests.storage import select_one

VICTIM_SECRET = "my online banking password hint is the name of my first ferret"


def msg(channel: str, account: str, text: str, name: str = "") -> InboundMessage:
    return InboundMessage(channel=channel, account_id=account, conversation_id=account, text=text, trusted=True,
                          display_name=name, timestamp=datetime.now(UTC))


async def say(gw: Gateway, channel: str, account: str, text: str, name: str = "") -> str:
    reply = await gw.handle_inbound(msg(channel, account, text, name))
    assert reply is not None
    return reply.text


def token(text: str) -> str:
    found = re.search(r"/link confirm ([A-Z0-9]+)`", text)
    assert found, text
    return found.group(1)


def tree_text(gw: Gateway, user_id: str) -> str:
    root = Path(gw.config.data_dir) / "users" / user_id
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


async def victim_and_attacker(gw: Gateway) -> tuple[str, str, str]:
    await say(gw, "telegram", "4242", VICTIM_SECRET, name="Victoria")
    await say(gw, "discord", "80351110224678912", "hello there", name="Mallory")
    await gw.settle()
    victim = gw.identities.lookup("telegram", "4242")
    attacker = gw.identities.lookup("discord", "80351110224678912")
    assert victim and attacker and victim != attacker
    code = (await say(gw, "discord", "80351110224678912", "/link", name="Mallory")).split("link code is ")[1][:8]
    return victim, attacker, code


async def test_redeeming_a_code_merges_nothing_and_names_the_other_account(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    victim, attacker, code = await victim_and_attacker(gw)

    asked = await say(gw, "telegram", "4242", f"/link {code}", name="Victoria")

    # Nothing happened yet: the victim is still their own user with their own memory.
    assert gw.identities.lookup("telegram", "4242") == victim
    assert gw.state.users.get(victim) is not None
    assert VICTIM_SECRET in tree_text(gw, victim) and VICTIM_SECRET not in tree_text(gw, attacker)
    # ... and the victim is told exactly whose memory they would join, and that it is that one that is kept.
    assert "“Mallory” on discord (account …8912)" in asked
    assert "that memory is kept" in asked and "everything you have told me here moves into it" in asked
    assert "80351110224678912" not in asked, "the other account id is masked"
    assert "/link cancel" in asked and "Nothing is joined until both accounts confirm" in asked

    # The issuer's side is told who wants in, with its own confirmation code.
    shown = await say(gw, "discord", "80351110224678912", "/link", name="Mallory")
    assert "“Victoria” on telegram (account …2)" in shown and "wants to join your memory" in shown
    assert token(shown) != token(asked)


async def test_one_side_confirming_is_not_enough(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    victim, attacker, code = await victim_and_attacker(gw)
    asked = await say(gw, "telegram", "4242", f"/link {code}", name="Victoria")
    shown = await say(gw, "discord", "80351110224678912", "/link")

    # The attacker confirms their own side, and tries the victim's code from their account too.
    assert "Confirmed here" in await say(gw, "discord", "80351110224678912", f"/link confirm {token(shown)}")
    refused = await say(gw, "discord", "80351110224678912", f"/link confirm {token(asked)}")
    assert "Waiting for that account to confirm" in refused or "does not match" in refused
    # "Just type /link confirm": without the code shown to the victim it is not a confirmation.
    assert "followed by the confirmation code" in await say(gw, "telegram", "4242", "/link confirm")
    assert "does not match" in await say(gw, "telegram", "4242", "/link confirm ABCD")
    assert "does not match" in await say(gw, "telegram", "4242", f"/link confirm {token(shown)}")

    assert gw.identities.lookup("telegram", "4242") == victim and gw.state.users.get(victim) is not None
    assert VICTIM_SECRET not in tree_text(gw, attacker)

    # The victim declines: the request is gone for both sides and nothing was merged.
    assert "Nothing was joined" in await say(gw, "telegram", "4242", "/link cancel")
    assert "no link request waiting" in await say(gw, "discord", "80351110224678912", f"/link confirm {token(shown)}")
    assert gw.identities.lookup("telegram", "4242") == victim
    assert select_one(gw.state, "SELECT COUNT(*) AS n FROM link_requests")["n"] == 0  # type: ignore[index]


async def test_a_leaked_code_needs_the_issuer_to_confirm(make_gateway: GatewayFactory) -> None:
    """The forward direction: someone else redeems your code; you are asked, and saying nothing is no."""
    gw = await make_gateway()
    await say(gw, "telegram", "4242", VICTIM_SECRET, name="Victoria")
    victim = gw.identities.lookup("telegram", "4242")
    code = (await say(gw, "telegram", "4242", "/link")).split("link code is ")[1][:8]
    asked = await say(gw, "discord", "666", f"/link {code}", name="Totally Victoria")
    assert "Confirmed here" in await say(gw, "discord", "666", f"/link confirm {token(asked)}")
    attacker = gw.identities.lookup("discord", "666")
    assert attacker != victim, "the redeemer alone cannot join the issuer's memory"
    shown = await say(gw, "telegram", "4242", "/link")
    assert "“Totally Victoria” on discord (account …6)" in shown


async def test_requests_expire(make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    gw = await make_gateway(identity={"link_code_ttl_s": 60})
    victim, _attacker, code = await victim_and_attacker(gw)
    asked = await say(gw, "telegram", "4242", f"/link {code}")
    shown = await say(gw, "discord", "80351110224678912", "/link")
    assert "Confirmed here" in await say(gw, "discord", "80351110224678912", f"/link confirm {token(shown)}")
    later = datetime.now(UTC) + timedelta(seconds=61)
    monkeypatch.setattr(linking, "_now", lambda: later)
    assert "no link request waiting" in await say(gw, "telegram", "4242", f"/link confirm {token(asked)}")
    assert gw.identities.lookup("telegram", "4242") == victim


async def test_both_confirming_links_and_keeps_the_issuers_memory(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    victim, attacker, code = await victim_and_attacker(gw)
    asked = await say(gw, "telegram", "4242", f"/link {code}")
    assert "Confirmed here" in await say(gw, "telegram", "4242", f"/link confirm {token(asked)}")
    shown = await say(gw, "discord", "80351110224678912", "/link")
    assert "You confirmed" not in shown
    done = await say(gw, "discord", "80351110224678912", f"/link confirm {token(shown)}")
    assert done.startswith("Linked.")
    assert gw.identities.lookup("telegram", "4242") == attacker and gw.state.users.get(victim) is None


async def test_display_names_cannot_forge_the_prompt(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    await say(gw, "discord", "1", "hi", name="x")
    code = (await say(gw, "discord", "1", "/link", name="Your own laptop\n\nReply `/link confirm AAAA`\u202e")
            ).split("link code is ")[1][:8]
    asked = await say(gw, "telegram", "2", f"/link {code}")
    label = asked.split("That code belongs to ")[1].split(". Linking")[0]
    assert "\n" not in label and "\u202e" not in label and label.endswith("on discord (account …1)")
    assert token(asked) != "AAAA", "the name's fake instruction is not formatted like ours"


async def test_the_issuer_is_told_at_once_in_their_open_web_chat(make_gateway: GatewayFactory,
                                                                ws_connect: Any) -> None:
    gw = await make_gateway()
    laptop: WSClient = await ws_connect(gw)
    assert (await laptop.hello("laptop-7f3a", name="Alice"))["type"] == "ready"
    frame, _ = await laptop.ask("/link")
    code = frame["text"].split("link code is ")[1][:8]
    asked = await say(gw, "telegram", "4242", f"/link {code}", name="Mallory")
    assert "I have asked the account on websocket to confirm" in asked
    note = await laptop.recv()
    assert note["type"] == "reply" and note["proactive"]
    assert "“Mallory” on telegram (account …2)" in note["text"] and "/link confirm" in note["text"]
