"""``/web`` on a linked channel answers, in a direct conversation only, with a one-time sign-in link for
that person; never in a group, never on a channel with identity scope 'channel'."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.testing import message, test_config
from tests.conftest import WSClient
from tests.signin.rig import browser, daemon, open_link, url
from tests.storage import count_rows

LINK = re.compile(r"http://127\.0\.0\.1:\d+/signin\?t=[A-Za-z0-9_%-]+")


async def test_web_in_the_web_chat_gives_a_link_that_signs_that_person_in(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw, browser() as http:
        ws = await http.ws_connect(url(gw, "/ws"))
        try:
            client = WSClient(ws)
            ready = await client.hello("phone-1", "Al")
            reply, _ = await client.ask("/web")
        finally:
            await ws.close()
        assert reply["type"] == "reply", reply
        found = LINK.search(reply["text"])
        assert found is not None, reply["text"]
        assert "15 minutes" in reply["text"]
        token = found.group(0).split("t=", 1)[1]
        # A command answer is not part of the transcript: the token is not stored with the conversation.
        assert count_rows(gw.state, "SELECT COUNT(*) FROM turns WHERE content LIKE ?", f"%{token}%") == 0
        assert (await open_link(http, found.group(0))).status == 303
        async with http.get(url(gw, "/t/whoami")) as resp:
            assert await resp.json() == {"user_id": ready["user_id"], "operator": False, "via": "cookie"}
        assert (await open_link(http, found.group(0))).status == 410


async def test_web_on_another_channel_in_a_direct_conversation(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw, browser() as http:
        reply = await gw.handle_inbound(message("/web", account="tg-42", channel="telegram"))
        assert reply is not None and reply.notice
        found = LINK.search(reply.text)
        assert found is not None, reply.text
        assert (await open_link(http, found.group(0))).status == 303
        async with http.get(url(gw, "/t/whoami")) as resp:
            assert (await resp.json())["user_id"] == gw.identities.lookup("telegram", "tg-42")


async def test_no_link_in_a_group(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        reply = await gw.handle_inbound(message("/web", account="tg-42", channel="telegram", group="g-1"))
        assert reply is not None and "direct conversation" in reply.text
        assert "signin?t=" not in reply.text
        assert count_rows(gw.state, "SELECT COUNT(*) FROM web_signin_tokens") == 0


async def test_no_link_on_a_channel_scoped_identity(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data", identity={"channel_scope": {"discord": "channel"}})) as gw:
        reply = await gw.handle_inbound(message("/web", account="d-7", channel="discord"))
        assert reply is not None and "identity scope 'channel'" in reply.text
        assert "signin?t=" not in reply.text
        assert count_rows(gw.state, "SELECT COUNT(*) FROM web_signin_tokens") == 0


async def test_help_lists_web(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        reply = await gw.handle_inbound(message("/help", account="tg-42", channel="telegram"))
        assert reply is not None and "/web:" in reply.text
