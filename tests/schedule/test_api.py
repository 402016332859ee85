"""The schedule in the console API: a person sees and cancels their own, never another's; the
operator sees anyone's and the overview. Over HTTP against a started daemon."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.app import Gateway
from gateway.schedule.items import REMINDERS
from gateway.testing import ConfigFactory
from tests.api.rig import operator, person, signed_in
from tests.signin.rig import daemon


@pytest.fixture
async def gw(kith_config: ConfigFactory) -> AsyncIterator[Gateway]:
    async with daemon(kith_config()) as gateway:
        yield gateway


async def test_person_sees_and_cancels_their_own_schedule(gw: Gateway) -> None:
    alice, bob = await person(gw, "alice"), await person(gw, "bob")
    gw.memory_store(alice).write(REMINDERS, "- [ ] every Monday at 9: water the plants\n- [ ] whenever\n",
                                 source="test")
    client = await signed_in(gw, alice)
    status, out = await client.get("/api/users/me/schedule")
    assert status == 200, out
    (item,) = out["items"]
    assert item["kind"] == "reminder" and item["text"] == "water the plants" and "FREQ=WEEKLY" in item["rule"]
    assert item["next_due"] and item["when"] == "every Monday at 09:00"
    assert [p["line"] for p in out["problems"]] == [2]
    status, _ = await client.get(f"/api/users/{bob}/schedule")
    assert status == 404  # another person's schedule does not exist for alice
    status, _ = await client.get("/api/schedule")
    assert status == 403
    status, out = await client.call("DELETE", f"/api/users/me/schedule/{item['id']}")
    assert status == 200 and out["cancelled"]["id"] == item["id"]
    assert "- [-] every Monday" in gw.memory_store(alice).read(REMINDERS)
    status, _ = await client.call("DELETE", f"/api/users/me/schedule/{item['id']}")
    assert status == 404  # no longer active
    await client.close()

    op = operator(gw)
    status, out = await op.get(f"/api/users/{alice}/schedule")
    assert status == 200 and out["items"][0]["status"] == "cancelled"
    status, out = await op.get("/api/schedule")
    assert status == 200 and [u["user_id"] for u in out["users"]] == [alice]
    assert out["users"][0]["active"] == 0 and out["users"][0]["problems"] == 1
    await op.close()
