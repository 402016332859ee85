"""One local owner (``server.local_owner``, docs/web.md#one-owner): on loopback without ``server.token``
every new local browser and terminal is the same person; a client someone already has stays theirs; a
token, a LAN name or ``local_owner: false`` keep one person per client, and nothing from beyond loopback
becomes the owner."""

from __future__ import annotations

import argparse
from pathlib import Path

import aiohttp
import pytest

from gateway.app import Gateway
from gateway.cli.chat import one_message
from gateway.identity.owner import OWNER_ACCOUNT, OWNER_CHANNEL, local_owner
from gateway.identity.users import Identities
from gateway.testing import test_config
from tests.conftest import WSClient
from tests.signin.rig import browser, daemon, person, url

TOKEN = "operator-token-for-tests-0123456789"


def owner_of(gw: Gateway) -> str | None:
    return gw.identities.lookup(OWNER_CHANNEL, OWNER_ACCOUNT)


async def hello(http: aiohttp.ClientSession, gw: Gateway, client_id: str, **kwargs: object) -> dict[str, object]:
    ws = await http.ws_connect(url(gw, "/ws"), **kwargs)  # type: ignore[arg-type]
    try:
        return await WSClient(ws).hello(client_id)
    finally:
        await ws.close()


async def test_every_new_browser_and_terminal_is_the_one_owner(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               ) -> None:  # fmt: skip
    async with daemon(test_config(tmp_path / "data")) as gw:
        users = []
        for client_id in ("web-1", "web-2"):
            async with browser() as http:  # a fresh browser each: its own cookie jar
                async with http.post(url(gw, "/api/session/local"), json={"client_id": client_id}) as resp:
                    body = await resp.json()
                assert body["operator"] is True
                ready = await hello(http, gw, client_id)
                assert ready["user_id"] == body["user_id"]
                users.append(body["user_id"])
        assert users[0] == users[1] == owner_of(gw)
        # A WebSocket client without a cookie or a token (a script) is the owner too.
        async with aiohttp.ClientSession() as http:
            assert (await hello(http, gw, "script-1"))["user_id"] == users[0]
        # And so is `kith chat` (its real client code, one message).
        args = argparse.Namespace(client_id="term-1", token=None, name="me", message="hello there")
        assert await one_message(args, url(gw, "/ws").replace("http", "ws")) == 0
        assert "hello there" in capsys.readouterr().out
        assert gw.identities.lookup("websocket", "term-1") == users[0]
        assert [u.user_id for u in gw.state.users.all()] == [users[0]]


async def test_a_client_someone_already_has_stays_theirs(tmp_path: Path) -> None:
    cfg = test_config(tmp_path / "data", identity_links=[{"user": "ada", "accounts": ["websocket:ada-laptop"]}])
    async with daemon(cfg) as gw:
        # Before there was an owner: a terminal of its own, and Bob's browser, linked to his Telegram.
        old = await person(gw, "old-term")
        bob = await person(gw, "bob-tg", channel="telegram")
        with gw.state.tx():
            gw.state.identities.add("websocket", "bob-tab", bob, source="test")
        async with aiohttp.ClientSession() as http:
            # Bob's tab is first after the upgrade: he is not made the owner (he has a chat account)...
            assert (await hello(http, gw, "bob-tab"))["user_id"] == bob
            owner = owner_of(gw)
            assert owner not in (None, bob, old)
            # ... the old terminal stays its own person until it is linked, a configured client is its
            # person, and a new client is the owner.
            assert (await hello(http, gw, "old-term"))["user_id"] == old
            assert (await hello(http, gw, "ada-laptop"))["user_id"] == "ada"
            assert (await hello(http, gw, "new-tab"))["user_id"] == owner


async def test_the_first_local_only_person_after_an_upgrade_becomes_the_owner(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data")) as gw:
        old = await person(gw, "web-old")  # a browser's own person, from before there was an owner
        async with browser() as http, http.post(url(gw, "/api/session/local"), json={"client_id": "web-old"}) as resp:
            assert (await resp.json())["user_id"] == old
        assert owner_of(gw) == old
        async with aiohttp.ClientSession() as http:
            assert (await hello(http, gw, "web-new"))["user_id"] == old
        # The owner is linked into another person (/link): that person is the owner from then on.
        other = await person(gw, "ada-tg", channel="telegram")
        gw.identities.merge(into=other, source=old)
        assert owner_of(gw) == other
        async with aiohttp.ClientSession() as http:
            assert (await hello(http, gw, "web-newer"))["user_id"] == other


async def test_one_person_per_client_when_the_operator_says_so(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data", server={"port": 0, "local_owner": False})) as gw:
        async with browser() as http, http.post(url(gw, "/api/session/local"), json={"client_id": "web-1"}) as resp:
            first = (await resp.json())["user_id"]
        async with aiohttp.ClientSession() as http:
            second = (await hello(http, gw, "web-2"))["user_id"]
        assert first != second and owner_of(gw) is None


async def test_with_a_token_every_client_is_its_own_and_nobody_is_the_owner(tmp_path: Path) -> None:
    async with daemon(test_config(tmp_path / "data", server={"port": 0, "token": TOKEN})) as gw:
        async with aiohttp.ClientSession() as http:
            auth = {"headers": {"Authorization": f"Bearer {TOKEN}"}}
            one, two = (await hello(http, gw, "c1", **auth)), (await hello(http, gw, "c2", **auth))
            assert one["user_id"] != two["user_id"]
            with pytest.raises(aiohttp.WSServerHandshakeError):  # no token: not even the owner
                await http.ws_connect(url(gw, "/ws"), headers={"Authorization": "Bearer wrong"})
        assert owner_of(gw) is None


async def test_nothing_from_beyond_loopback_becomes_the_owner(tmp_path: Path) -> None:
    cfg = test_config(tmp_path / "data", server={"port": 0, "public_names": ["kith.lan"]})
    async with daemon(cfg) as gw:
        async with aiohttp.ClientSession() as http:
            owner = (await hello(http, gw, "local-tab"))["user_id"]
            # The LAN name (or a rebound DNS name listed there) is not loopback: a person of its own.
            lan = await hello(http, gw, "lan-tab", headers={"Host": f"kith.lan:{gw.port}"})
            assert lan["user_id"] != owner
            # A proxy speaking for someone else, and a foreign page, are refused before the upgrade.
            for headers in ({"X-Forwarded-For": "203.0.113.9"}, {"Origin": "https://evil.example"},
                            {"Host": "evil.example"}):
                with pytest.raises(aiohttp.WSServerHandshakeError):
                    await http.ws_connect(url(gw, "/ws"), headers=headers)
        assert owner_of(gw) == owner
        assert gw.identities.lookup("websocket", "lan-tab") != owner


async def test_two_nodes_making_the_owner_at_once_agree(tmp_path: Path) -> None:
    """Another node of a cluster inserts the owner between this node's look-up and its insert."""
    async with daemon(test_config(tmp_path / "data")) as gw:
        theirs = await person(gw, "their-tab")

        class LateLookup(Identities):
            first = True

            def lookup(self, channel: str, account_id: str) -> str | None:
                if (channel, account_id) == (OWNER_CHANNEL, OWNER_ACCOUNT) and LateLookup.first:
                    LateLookup.first = False
                    with gw.state.tx():  # the other node, just now
                        gw.state.identities.add(OWNER_CHANNEL, OWNER_ACCOUNT, theirs, source="owner")
                    return None
                return super().lookup(channel, account_id)

        assert local_owner(LateLookup(gw.state, gw.config), client_id="my-tab") == theirs
        assert owner_of(gw) == theirs and [u.user_id for u in gw.state.users.all()] == [theirs]  # rolled back
