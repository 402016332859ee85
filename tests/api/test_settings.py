"""/api/me and a person's settings: happy paths, bad input, who may see whom, and the timezone
reaching the next prompt's date line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from gateway.app import Gateway
from gateway.hookspecs import hookimpl
from gateway.testing import message
from tests.api.rig import operator, person, signed_in
from tests.fakes.anthropic import FakeAnthropic


async def test_me_shows_the_person_and_their_accounts(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    client = await signed_in(gw, alice)
    status, me = await client.get("/api/me")
    assert status == 200
    assert me["user_id"] == alice and me["display_name"] == "Alice" and me["operator"] is False
    assert me["accounts"] == [{"channel": "websocket", "account_id": "alice"}]
    assert me["csrf"] and me["timezone"] == "UTC" and me["tier"] is None and me["persona"]
    await client.close()


async def test_me_without_sign_in_is_401_json(gw: Gateway) -> None:
    from tests.api.rig import Client
    from tests.signin.rig import browser

    nobody = Client(gw, browser())
    status, body = await nobody.get("/api/me")
    assert status == 401 and body["error"] == "unauthorized" and body["message"]
    status, body = await nobody.get("/api/users/me/settings")
    assert status == 401 and body["error"] == "unauthorized"
    await nobody.close()


async def test_settings_change_and_validation(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    client = await signed_in(gw, alice)
    status, out = await client.call("PATCH", "/api/users/me/settings",
                                    {"display_name": "Ally", "timezone": "Asia/Tokyo", "tier": 3})
    assert status == 200, out
    assert (out["display_name"], out["timezone"], out["tier"]) == ("Ally", "Asia/Tokyo", 3)
    user = gw.state.users.get(alice)
    assert user is not None and (user.display_name, user.timezone, user.tier) == ("Ally", "Asia/Tokyo", 3)
    # Only the fields given change; null tier goes back to the configured default.
    status, out = await client.call("PATCH", f"/api/users/{alice}/settings", {"tier": None})
    assert status == 200 and out["tier"] is None and out["timezone"] == "Asia/Tokyo"

    bad: list[dict[str, Any]] = [
        {"timezone": "Mars/Olympus_Mons"}, {"timezone": "../../etc/passwd"}, {"timezone": None}, {"tier": 0},
        {"tier": 5}, {"tier": "2"}, {"display_name": ""}, {"display_name": "x" * 101}, {"colour": "blue"},
        {"persona": "no-such-persona"}, {"persona": "../x"},
    ]
    for body in bad:
        status, out = await client.call("PATCH", "/api/users/me/settings", body)
        assert status == 400, (body, status, out)
        assert out["error"] == "invalid" and out["message"], out
    status, out = await client.call("PATCH", "/api/users/me/settings", raw=b"[1, 2")
    assert status == 400 and out["error"] == "invalid"
    status, out = await client.call("PATCH", "/api/users/me/settings", raw=b'"a string"')
    assert status == 400
    user = gw.state.users.get(alice)
    assert user is not None and (user.display_name, user.timezone, user.tier) == ("Ally", "Asia/Tokyo", None)
    await client.close()


async def test_persona_setting_uses_the_persona_choice(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    client = await signed_in(gw, alice)
    _, me = await client.get("/api/me")
    name = me["personas"][0]
    status, out = await client.call("PATCH", "/api/users/me/settings", {"persona": name})
    assert status == 200 and out["persona"] == name
    assert gw.state.persona_choices.chosen(alice, "") == name
    status, out = await client.call("PATCH", "/api/users/me/settings", {"persona": None})
    assert status == 200 and gw.state.persona_choices.chosen(alice, "") is None
    await client.close()


async def test_a_person_sees_only_themselves_and_the_operator_everyone(gw: Gateway) -> None:
    alice, bob = await person(gw, "alice"), await person(gw, "bob")
    a = await signed_in(gw, alice)
    for method, body in (("GET", None), ("PATCH", {"display_name": "Mallory"})):
        status, out = await a.call(method, f"/api/users/{bob}/settings", body)
        assert status == 404 and out["error"] == "not_found", out
        # The same answer as for a user that does not exist: nothing tells that bob is there.
        status, out2 = await a.call(method, "/api/users/u000000000000/settings", body)
        assert (status, out2) == (404, out)
    bob_user = gw.state.users.get(bob)
    assert bob_user is not None and bob_user.display_name == "Bob"

    op = operator(gw)
    status, out = await op.call("PATCH", f"/api/users/{bob}/settings", {"timezone": "Europe/Paris"})
    assert status == 200 and out["timezone"] == "Europe/Paris"
    status, out = await op.get("/api/users/u000000000000/settings")
    assert status == 404
    status, out = await op.get("/api/users/me/settings")  # the operator token is no person
    assert status == 404
    status, me = await op.get("/api/me")
    assert status == 200 and me["user_id"] is None and me["operator"] is True
    await a.close()
    await op.close()


async def test_csrf_token_is_required_for_a_cookie_change(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    client = await signed_in(gw, alice)
    status, out = await client.call("PATCH", "/api/users/me/settings", {"display_name": "Eve"},
                                    headers={"X-CSRF-Token": "wrong"})
    assert status == 403 and out["error"] == "forbidden"
    user = gw.state.users.get(alice)
    assert user is not None and user.display_name == "Alice"
    await client.close()


def _local_date_line(zone: str) -> set[str]:
    # The prompt's date line is rendered at the turn; accept the minute before and after a boundary.
    now = datetime.now(UTC).astimezone(ZoneInfo(zone))
    return {f"{now:%A, %Y-%m-%d}", f"{datetime.now(UTC).astimezone(ZoneInfo(zone)):%A, %Y-%m-%d}"}


async def test_timezone_change_reaches_the_next_prompts_date_line(
    make_daemon: Any, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    async with make_daemon(llm=anthropic_llm) as gw:
        alice = await person(gw, "alice")
        assert "(UTC)" in fake_anthropic.system_of(fake_anthropic.last_turn())
        client = await signed_in(gw, alice)
        # Kiritimati is UTC+14: its date differs from UTC's for ten hours a day, and its name shows always.
        for zone in ("Pacific/Kiritimati", "America/Los_Angeles"):
            status, _ = await client.call("PATCH", "/api/users/me/settings", {"timezone": zone})
            assert status == 200
            expected = _local_date_line(zone)
            await gw.handle_inbound(message("what day is it?", account="alice"))
            system = fake_anthropic.system_of(fake_anthropic.last_turn())
            line = next(x for x in system.splitlines() if x.startswith("Current date and time:"))
            assert line.endswith(f"({zone})"), line
            assert any(day in line for day in expected), (line, expected)
        await client.close()


async def test_tier_setting_is_the_next_turns_tier(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    client = await signed_in(gw, alice)
    assert (await client.call("PATCH", "/api/users/me/settings", {"tier": 4}))[0] == 200
    reply = await gw.handle_inbound(message("next", account="alice"))
    assert reply is not None
    status, page = await client.get(f"/api/users/me/sessions/{reply.session_id}/messages?limit=1")
    assert status == 200
    status, seen = await client.get(f"/api/users/me/turns/{page['messages'][0]['turn_id']}/context")
    assert status == 200 and seen["tier"] == 4
    await client.close()


class _Watcher:
    def __init__(self) -> None:
        self.changed: list[str] = []

    @hookimpl
    def gateway_conversation_changed(self, gateway: Gateway, user_id: str) -> None:
        self.changed.append(user_id)


async def test_a_settings_change_tells_open_chats(kith_config: Any) -> None:
    watcher = _Watcher()
    gw = Gateway(kith_config(), plugins=(watcher,))
    async with gw:
        alice = await person(gw, "alice")
        client = await signed_in(gw, alice)
        watcher.changed.clear()
        assert (await client.call("PATCH", "/api/users/me/settings", {"tier": 1}))[0] == 200
        assert watcher.changed == [alice]
        assert (await client.call("PATCH", "/api/users/me/settings", {"tier": 9}))[0] == 400
        assert watcher.changed == [alice]
        await client.close()
