"""The WebSocket frames of issue 14 through a real daemon: what ``ready`` tells, the ``history`` replay of
the current session, ``state`` pushed to every client of a person, and a signed-in browser's cookie."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from gateway.testing import GatewayFactory, message
from tests.conftest import WSClient

Connect = Callable[..., Awaitable[WSClient]]


async def frame_of(client: WSClient, kind: str) -> dict[str, Any]:
    """The next frame of ``kind``, skipping others (a state frame may come before or after a reply)."""
    while True:
        frame = await client.recv()
        if frame["type"] == kind:
            return frame


async def no_frame(client: WSClient) -> None:
    """Nothing arrives: checked with a ping, answered after anything already sent."""
    await client.ws.send_json({"type": "ping"})
    assert await client.recv() == {"type": "pong"}


async def said(client: WSClient, text: str) -> list[dict[str, Any]]:
    """Send a message; every frame about it, its reply and what follows the reply (WSClient.ask skips
    state frames, which may come before or after the reply)."""
    # ids are unique per client_id (two tabs of one client share them): a reused one is a redelivery
    await client.ws.send_json({"type": "message", "id": uuid.uuid4().hex, "text": text})
    frames = [await client.recv()]
    while frames[-1]["type"] != "reply":
        frames.append(await client.recv())
    await client.ws.send_json({"type": "ping"})
    while frames[-1]["type"] != "pong":
        frames.append(await client.recv())
    return frames


def states(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] == "state"]


async def history(client: WSClient, **fields: Any) -> dict[str, Any]:
    await client.ws.send_json({"type": "history", **fields})
    return await frame_of(client, "history")


async def test_ready_tells_who_and_where(kith_gateway: GatewayFactory, ws_connect: Connect) -> None:
    gw = await kith_gateway(context={"default_tier": 3}, server={"local_owner": False})
    client = await ws_connect(gw)
    ready = await client.hello("p1", "Ada")
    assert ready["type"] == "ready" and ready["display_name"] == "Ada" and ready["persona"] == "kith"
    assert ready["session_id"] is None and ready["otr"] is False and ready["tier"] == 3
    assert ready["accounts"] == [{"channel": "websocket", "account_id": "p1"}]
    reply, _ = await client.ask("hello")
    await client.ws.close()
    again = await (await ws_connect(gw)).hello("p1", "Ada")
    assert again["session_id"] == reply["session_id"] and again["user_id"] == ready["user_id"]


async def test_history_pages_the_current_session_only(kith_gateway: GatewayFactory, ws_connect: Connect) -> None:
    gw = await kith_gateway(server={"local_owner": False})  # two people, each a client of their own
    ada, bob = await ws_connect(gw), await ws_connect(gw)
    await ada.hello("ada")
    await bob.hello("bob")
    assert await history(ada) == {"type": "history", "session_id": None, "messages": [], "more": False}
    for i in range(3):
        await ada.ask(f"ada says {i}")
    await bob.ask("bob's secret")
    full = await history(ada)
    # (the echo model's reply adds a second line describing its prompt)
    texts = [(m["role"], m["text"].splitlines()[0]) for m in full["messages"]]
    assert texts == [("user", "ada says 0"), ("assistant", "echo: ada says 0"), ("user", "ada says 1"),
                     ("assistant", "echo: ada says 1"), ("user", "ada says 2"), ("assistant", "echo: ada says 2")]
    assert full["more"] is False and all(m["turn_id"] and m["at"].endswith("+00:00") for m in full["messages"])
    seqs = [m["seq"] for m in full["messages"]]
    assert seqs == sorted(seqs)
    last = await history(ada, limit=2, id="h1")
    assert last["id"] == "h1" and last["messages"] == full["messages"][-2:] and last["more"] is True
    earlier = await history(ada, limit=4, before_seq=last["messages"][0]["seq"])
    assert earlier["messages"] == full["messages"][:4] and earlier["more"] is False
    assert "bob's secret" not in str(full) and "ada says" not in str(await history(bob))
    # a fresh session starts empty; the old one is not replayed
    await ada.ask("/new")
    fresh = await history(ada)
    assert fresh["messages"] == [] and fresh["session_id"] not in (None, full["session_id"])


async def test_history_of_off_the_record_only_while_it_lives(kith_gateway: GatewayFactory,
                                                             ws_connect: Connect) -> None:
    gw = await kith_gateway()
    client = await ws_connect(gw)
    await client.hello("otr")
    await client.ask("on the record")
    stored = await history(client)
    await client.ask("/otr on")
    await client.ask("between us")
    await client.ask("still between us")
    otr = await history(client)
    assert otr["session_id"].startswith("otr-")
    said_otr = [m["text"].splitlines()[0] for m in otr["messages"]]
    assert said_otr == ["between us", "echo: between us", "still between us", "echo: still between us"]
    assert [m["seq"] for m in otr["messages"]] == [1, 2, 3, 4]
    assert (await history(client, before_seq=3, limit=1))["messages"] == otr["messages"][1:2]
    await client.ask("/otr off")
    after = await history(client)
    assert after == stored
    assert "between us" not in str(after)


@pytest.mark.parametrize("bad", [{"limit": 0}, {"limit": 201}, {"limit": "5"}, {"before_seq": 0},
                                 {"before_seq": True}, {"before_seq": 1.5}])
async def test_history_refuses_bad_paging(kith_gateway: GatewayFactory, ws_connect: Connect,
                                          bad: dict[str, Any]) -> None:
    gw = await kith_gateway()
    client = await ws_connect(gw)
    await client.ws.send_json({"type": "history"})
    assert (await client.recv())["code"] == "no_hello"
    await client.hello("pager")
    await client.ws.send_json({"type": "history", "id": 9, **bad})
    frame = await client.recv()
    assert frame["type"] == "error" and frame["code"] == "bad_frame" and frame["id"] == 9


async def test_state_reaches_every_client_of_the_person(kith_gateway: GatewayFactory, ws_connect: Connect) -> None:
    gw = await kith_gateway(server={"local_owner": False})  # "someone-else" is another person
    tab1, tab2, other = await ws_connect(gw), await ws_connect(gw), await ws_connect(gw)
    ready = await tab1.hello("laptop")
    await tab2.hello("laptop")
    await other.hello("someone-else")
    (first,) = states(await said(tab1, "hello"))  # the first turn opens a session: both tabs learn its id
    assert first["session_id"] and first["otr"] is False
    assert (await frame_of(tab2, "state")) == first
    (state,) = states(await said(tab1, "/new"))
    assert state["session_id"] not in (None, first["session_id"]) and state["otr"] is False
    assert (await frame_of(tab2, "state")) == state
    (state,) = states(await said(tab1, "/otr on"))
    assert state["otr"] is True and state["session_id"].startswith("otr-")
    assert (await frame_of(tab2, "state")) == state
    (state,) = states(await said(tab2, "/otr off"))
    assert state["otr"] is False
    assert (await frame_of(tab1, "state")) == state
    assert states(await said(tab1, "/help")) == []  # nothing changed: no state frame
    await no_frame(tab2)
    await no_frame(other)
    # a change made elsewhere (another channel, the HTTP API) is announced through the hook
    user = gw.identities.resolve(message("", account="laptop"))
    assert user is not None and user.user_id == ready["user_id"]
    gw.sessions.new(user, message("", account="laptop"), datetime.now(UTC))
    await gw.hooks.conversation_changed(gw, user_id=user.user_id)
    pushed = await frame_of(tab2, "state")
    assert set(pushed) == {"type", "session_id", "otr", "persona", "tier", "display_name"}
    await no_frame(other)


async def test_persona_and_settings_changes_push_state(kith_gateway: GatewayFactory, ws_connect: Connect) -> None:
    from gateway.personas import bootstrap, persona_store

    gw = await kith_gateway(server={"token": "operator-secret"})
    bootstrap(persona_store(gw, "owl"), "owl", template="developer")
    auth = {"Authorization": "Bearer operator-secret"}
    tab, other = await ws_connect(gw, headers=auth), await ws_connect(gw, headers=auth)
    ready = await tab.hello("persona-tab", "Ada")
    await other.hello("another-person")
    await tab.ask("hello")
    before = await frame_of(tab, "state")
    (switched,) = states(await said(tab, "/persona owl"))  # H-PERSONA's command, announced by the hook
    assert switched["persona"] == "owl" and switched["session_id"] not in (None, before["session_id"])
    # settings changed through the HTTP API reach the open chat
    async with aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{gw.port}/api/users/{ready['user_id']}/settings"
        async with http.patch(url, json={"display_name": "Ada L.", "tier": 4}, headers=auth) as resp:
            assert resp.status == 200, await resp.text()
    changed = await frame_of(tab, "state")
    assert changed["display_name"] == "Ada L." and changed["tier"] == 4 and changed["persona"] == "owl"
    await no_frame(other)


async def _signed_in_cookie(gw: Any, http: aiohttp.ClientSession, user_id: str) -> str:
    from gateway.http.signin import SESSION_COOKIE, mint_link

    link = mint_link(gw, user_id, operator=False, issued_by="test")
    async with http.get(link.url, headers={"Sec-Fetch-Mode": "navigate"}, allow_redirects=False) as resp:
        assert resp.status == 303, await resp.text()
        return resp.cookies[SESSION_COOKIE].value


async def test_signed_in_cookie_links_the_client_to_its_person(kith_gateway: GatewayFactory,
                                                               ws_connect: Connect) -> None:
    gw = await kith_gateway(server={"token": "operator-secret"})
    # Ada exists through another account (say Telegram, here a token-authenticated terminal)
    term = await ws_connect(gw, headers={"Authorization": "Bearer operator-secret"})
    ada = (await term.hello("ada-terminal"))["user_id"]
    async with aiohttp.ClientSession() as http:
        cookie = await _signed_in_cookie(gw, http, ada)
    headers = {"Cookie": f"kith_session={cookie}"}
    browser = await ws_connect(gw, headers=headers)  # no token: the cookie authenticates
    ready = await browser.hello("web-new-browser")
    assert ready["type"] == "ready" and ready["user_id"] == ada
    assert {"channel": "websocket", "account_id": "web-new-browser"} in ready["accounts"]
    assert gw.identities.lookup("websocket", "web-new-browser") == ada
    # the browser shares Ada's session with her other account
    reply, _ = await term.ask("remember the boat")
    assert (await history(browser))["session_id"] == reply["session_id"]
    # someone else's client id is not taken over by a cookie
    await (await ws_connect(gw, headers={"Authorization": "Bearer operator-secret"})).hello("bobs-client")
    hijack = await ws_connect(gw, headers=headers)
    refused = await hijack.hello("bobs-client")
    assert refused["type"] == "error" and refused["code"] == "account_taken"
    assert gw.identities.lookup("websocket", "bobs-client") != ada
    # without the cookie (and without the token) nothing is authenticated
    anon = await ws_connect(gw)
    await anon.ws.send_json({"type": "hello", "client_id": "x"})
    assert (await anon.recv())["code"] == "unauthorized"
    await asyncio.wait_for(anon.ws.receive(), 5)
    assert anon.ws.close_code == 4401


async def test_a_link_shows_the_joined_session_on_both_clients(kith_gateway: GatewayFactory,
                                                               ws_connect: Connect) -> None:
    gw = await kith_gateway(server={"local_owner": False})  # two people until the link joins them
    laptop, phone = await ws_connect(gw), await ws_connect(gw)
    await laptop.hello("laptop")
    await phone.hello("phone")
    await laptop.ask("on the laptop")
    await phone.ask("on the phone")
    code = (await laptop.ask("/link"))[0]["text"].split("link code is ")[1].split(".")[0]
    asked = (await phone.ask(f"/link {code}"))[0]["text"]
    shown = next(f["text"] for f in await said(laptop, "/link") if f["type"] == "reply")
    await laptop.ask("/link confirm " + shown.split("/link confirm ")[1].split("`")[0])
    frames = await said(phone, "/link confirm " + asked.split("/link confirm ")[1].split("`")[0])
    assert any(f["type"] == "reply" and f["text"].startswith("Linked.") for f in frames)
    # one person, one direct session: the merge kept the newest open (the phone's, used last), so the
    # phone's view did not change and the laptop is told it is in that session now
    assert states(frames) == []
    joined = (await history(phone))["session_id"]
    assert (await frame_of(laptop, "state"))["session_id"] == joined == (await history(laptop))["session_id"]
    assert gw.identities.lookup("websocket", "phone") == gw.identities.lookup("websocket", "laptop")
