"""Acceptance 5: two accounts linked with the link-code flow become one user and one tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.types import ConversationKind, InboundMessage
from tests.storage import select_rows


def msg(channel: str, account: str, text: str, **kw: Any) -> InboundMessage:
    return InboundMessage(channel=channel, account_id=account, text=text, trusted=True, **kw)


def confirm_token(text: str) -> str:
    return text.split("/link confirm ")[1].split("`")[0]


async def test_link_code_merges_accounts(tmp_path: Path, make_gateway: Any) -> None:
    gw = await make_gateway()
    await gw.handle_inbound(msg("websocket", "laptop", "I'm on my laptop"))
    await gw.handle_inbound(msg("telegram", "4242", "and this is my phone"))
    laptop_user = gw.identities.lookup("websocket", "laptop")
    phone_user = gw.identities.lookup("telegram", "4242")
    assert laptop_user and phone_user and laptop_user != phone_user

    answer = await gw.handle_inbound(msg("websocket", "laptop", "/link"))
    assert answer is not None and answer.notice
    code = answer.text.split("link code is ")[1].split(".")[0]
    # Since issue 12 both accounts confirm, each with the code from the message naming the other one.
    asked = await gw.handle_inbound(msg("telegram", "4242", f"/link {code.lower()}"))
    assert asked is not None and "websocket" in asked.text and gw.identities.lookup("telegram", "4242") == phone_user
    shown = await gw.handle_inbound(msg("websocket", "laptop", "/link"))
    assert shown is not None and "telegram" in shown.text
    await gw.handle_inbound(msg("websocket", "laptop", f"/link confirm {confirm_token(shown.text)}"))
    done = await gw.handle_inbound(msg("telegram", "4242", f"/link confirm {confirm_token(asked.text)}"))
    assert done is not None and done.text.startswith("Linked.")

    assert gw.identities.lookup("telegram", "4242") == laptop_user
    assert sorted(gw.identities.accounts(laptop_user)) == [("telegram", "4242"), ("websocket", "laptop")]
    users_dir = tmp_path / "data" / "users"
    assert [p.name for p in users_dir.iterdir()] == [laptop_user]
    log = next((users_dir / laptop_user / "sessions").glob("*.md")).read_text()
    assert "I'm on my laptop" in log and "and this is my phone" in log
    assert gw.state.users.get(phone_user) is None
    turns = select_rows(gw.state, "SELECT DISTINCT user_id FROM turns")
    assert [r["user_id"] for r in turns] == [laptop_user]

    # A code is single-use.
    again = await gw.handle_inbound(msg("discord", "77", f"/link {code}"))
    assert again is not None and "unknown or expired" in again.text


async def test_wrong_codes_are_rate_limited(make_gateway: Any) -> None:
    gw = await make_gateway()
    for _ in range(5):
        r = await gw.handle_inbound(msg("discord", "9", "/link WRONGCODE"))
        assert r is not None and "unknown or expired" in r.text
    r = await gw.handle_inbound(msg("discord", "9", "/link WRONGCODE"))
    assert r is not None and "Too many" in r.text


async def test_link_refused_in_groups_and_channel_scope(tmp_path: Path, make_gateway: Any) -> None:
    gw = await make_gateway(identity={"channel_scope": {"discord": "channel"}})
    r = await gw.handle_inbound(msg("discord", "1", "/link"))
    assert r is not None and "keeps its own identity" in r.text
    r = await gw.handle_inbound(msg("telegram", "1", "/link", kind=ConversationKind.GROUP, conversation_id="g"))
    assert r is not None and "direct conversation" in r.text


async def test_config_identity_links(tmp_path: Path, make_gateway: Any) -> None:
    gw = await make_gateway(identity_links=[{"user": "alice", "accounts": ["telegram:1", "discord:2"]}])
    await gw.handle_inbound(msg("telegram", "1", "hi from telegram"))
    await gw.handle_inbound(msg("discord", "2", "hi from discord"))
    assert gw.identities.lookup("telegram", "1") == gw.identities.lookup("discord", "2") == "alice"
    rows = select_rows(gw.state, "SELECT DISTINCT session_id FROM turns WHERE user_id='alice'")
    assert len(rows) == 1, "a person's direct conversation continues across channels"
