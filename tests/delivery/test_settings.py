"""Delivery settings through the person API: preferred channel, quiet hours, notification conversation."""

from __future__ import annotations

from gateway.app import Gateway
from tests.api.rig import person, signed_in


async def test_delivery_settings_change_and_validation(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    await person(gw, "bob")
    client = await signed_in(gw, alice)
    status, out = await client.get(f"/api/users/{alice}/settings")
    assert status == 200 and (out["preferred_channel"], out["quiet_hours"], out["notify_conversation"]) == ("", "", "")
    status, out = await client.call("PATCH", "/api/users/me/settings",
                                    {"preferred_channel": "websocket", "quiet_hours": "22:30-07:00",
                                     "notify_conversation": "websocket:alice"})  # fmt: skip
    assert status == 200, out
    assert (out["preferred_channel"], out["quiet_hours"], out["notify_conversation"]) == (
        "websocket", "22:30-07:00", "websocket:alice")
    prefs = gw.state.outbox.prefs(alice)
    assert (prefs.preferred_channel, prefs.quiet_start, prefs.quiet_end) == ("websocket", "22:30", "07:00")
    # Only the given field changes; "" clears.
    status, out = await client.call("PATCH", "/api/users/me/settings", {"quiet_hours": ""})
    assert status == 200 and out["quiet_hours"] == "" and out["preferred_channel"] == "websocket"
    for body in ({"preferred_channel": "telegram"}, {"quiet_hours": "25:00-07:00"}, {"quiet_hours": "22:00"},
                 {"quiet_hours": "07:00-07:00"}, {"notify_conversation": "websocket:bob"},
                 {"notify_conversation": "telegram:nobody"}):  # fmt: skip
        status, out = await client.call("PATCH", "/api/users/me/settings", body)
        assert status == 400, (body, status, out)
    assert gw.state.outbox.prefs(alice).notify_conversation == "websocket:alice"
    await client.close()
