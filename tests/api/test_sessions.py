"""Past sessions through the API: listed by date, found by full-text and semantic search, read page
by page; what the model saw for a turn (never for Off-The-Record); the operator's users and pairing."""

from __future__ import annotations

from gateway.app import Gateway
from gateway.testing import message
from gateway.turn.admission import AccessStore
from tests.api.rig import operator, person, signed_in


async def test_sessions_listed_searched_and_paged(gw: Gateway) -> None:
    alice = await person(gw, "alice")  # session 1: "hello"
    await gw.handle_inbound(message("we paddled the kayak across the fjord", account="alice"))
    await gw.handle_inbound(message("/new", account="alice"))
    await gw.handle_inbound(message("my sourdough starter needs feeding", account="alice"))
    bob = await person(gw, "bob")
    await gw.handle_inbound(message("kayak rentals near me?", account="bob"))
    await gw.settle()
    client = await signed_in(gw, alice)

    status, out = await client.get("/api/users/me/sessions")
    assert status == 200
    sessions = out["sessions"]
    assert [s["title"] for s in sessions] == ["my sourdough starter needs feeding", "hello"]
    assert sessions[0]["open"] and not sessions[1]["open"] and sessions[1]["ended_at"]
    assert sessions[1]["turns"] == 2 and sessions[0]["channel"] == "websocket"
    newest, oldest = sessions[0]["session_id"], sessions[1]["session_id"]

    status, out = await client.get(f"/api/users/me/sessions?before={sessions[0]['started_at']}")
    assert [s["session_id"] for s in out["sessions"]] == [oldest]
    status, out = await client.get("/api/users/me/sessions?limit=1")
    assert [s["session_id"] for s in out["sessions"]] == [newest]

    # Full text: every word, accents folded, FTS syntax taken as plain words; never Bob's session.
    status, out = await client.get("/api/users/me/sessions?q=KAYAK+fjord")
    assert status == 200 and [s["session_id"] for s in out["sessions"]] == [oldest]
    for q in ('kayak"', "kayak OR sourdough", "NEAR(kayak)", "*", "fjörd"):
        status, out = await client.get(f"/api/users/me/sessions?q={q}")
        assert status == 200, (q, out)
    status, out = await client.get("/api/users/me/sessions?q=rentals")
    assert out["sessions"] == []
    # Semantic: the recall over indexed session turns.
    status, out = await client.get("/api/users/me/sessions?q=bread+baking&mode=semantic")
    assert status == 200 and out["sessions"] and out["sessions"][0]["session_id"] == newest

    status, page = await client.get(f"/api/users/me/sessions/{oldest}/messages?limit=3")
    assert status == 200 and page["more"] is True and len(page["messages"]) == 3
    assert [m["role"] for m in page["messages"]] == ["assistant", "user", "assistant"]
    assert page["messages"][1]["text"] == "we paddled the kayak across the fjord"
    status, earlier = await client.get(
        f"/api/users/me/sessions/{oldest}/messages?limit=3&before_seq={page['messages'][0]['seq']}")
    assert earlier["more"] is False and [m["text"] for m in earlier["messages"]] == ["hello"]

    bob_session = gw.state.sessions.open_in(f"user:{bob}")
    assert bob_session is not None
    for path in (f"/api/users/me/sessions/{bob_session.session_id}/messages", "/api/users/me/sessions/nope/messages",
                 f"/api/users/{bob}/sessions"):
        status, err = await client.get(path)
        assert status == 404, (path, err)
    for path in ("/api/users/me/sessions?limit=0", "/api/users/me/sessions?limit=x",
                 "/api/users/me/sessions?mode=fuzzy", "/api/users/me/sessions?before=yesterday",
                 "/api/users/me/sessions?before=2026-01-01T00:00:00",
                 f"/api/users/me/sessions/{oldest}/messages?before_seq=-1",
                 f"/api/users/me/sessions/{oldest}/messages?limit=1000"):
        status, err = await client.get(path)
        assert status == 400 and err["error"] == "invalid", (path, err)
    await client.close()


async def test_turn_context_is_kept_for_stored_turns_only(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    bob = await person(gw, "bob")
    reply = await gw.handle_inbound(message("what do you know about me?", account="alice"))
    assert reply is not None and reply.turn_id
    client = await signed_in(gw, alice)
    status, seen = await client.get(f"/api/users/me/turns/{reply.turn_id}/context")
    assert status == 200 and seen["turn_id"] == reply.turn_id and seen["session_id"] == reply.session_id
    assert "system" in [s["source"] for s in seen["sections"]] and seen["system_tokens"] > 0
    assert seen["history_messages"] == 2 and seen["tier"] == 2 and seen["budget_tokens"] > 0

    await gw.handle_inbound(message("/otr on", account="alice"))
    secret = await gw.handle_inbound(message("a secret", account="alice"))
    assert secret is not None and secret.otr and secret.turn_id
    status, _ = await client.get(f"/api/users/me/turns/{secret.turn_id}/context")
    assert status == 404
    assert gw.state.turn_contexts.get(secret.turn_id) is None

    bobs = await gw.handle_inbound(message("mine", account="bob"))
    assert bobs is not None
    status, _ = await client.get(f"/api/users/me/turns/{bobs.turn_id}/context")
    assert status == 404
    status, _ = await client.get(f"/api/users/{bob}/turns/{bobs.turn_id}/context")
    assert status == 404
    op = operator(gw)
    status, seen = await op.get(f"/api/users/{bob}/turns/{bobs.turn_id}/context")
    assert status == 200 and seen["turn_id"] == bobs.turn_id
    await client.close()
    await op.close()


async def test_operator_users_and_pairing(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    bob = await person(gw, "bob")
    access = AccessStore(gw.state)
    code = access.request("telegram", "4242", "Stranger", ttl_s=3600, max_pending=10, reply_interval_s=0).code
    other = access.request("telegram", "4343", "Other", ttl_s=3600, max_pending=10, reply_interval_s=0).code
    assert code and other

    a = await signed_in(gw, alice)
    for method, path in (("GET", "/api/users"), ("GET", "/api/pairing"), ("POST", f"/api/pairing/{code}/approve"),
                         ("POST", f"/api/pairing/{code}/deny")):
        status, err = await a.call(method, path)
        assert status == 403 and err["error"] == "forbidden", (path, err)
    assert not access.is_approved("telegram", "4242")

    op = operator(gw)
    status, out = await op.get("/api/users")
    assert status == 200 and {u["user_id"] for u in out["users"]} == {alice, bob}
    status, out = await op.get("/api/pairing")
    assert status == 200 and {p["code"] for p in out["pending"]} == {code, other}
    status, out = await op.call("POST", f"/api/pairing/{code}/approve")
    assert status == 200 and out["action"] == "approved" and out["account_id"] == "4242"
    assert access.is_approved("telegram", "4242")
    status, out = await op.call("POST", f"/api/pairing/{other}/deny")
    assert status == 200 and out["action"] == "denied" and not access.is_approved("telegram", "4343")
    for path in (f"/api/pairing/{code}/approve", "/api/pairing/NOPE/deny", "/api/pairing/" + "x" * 300 + "/approve"):
        status, err = await op.call("POST", path)
        assert status == 404, (path, err)

    # An operator signed in with the cookie (operator link) may do the same, with the CSRF token.
    o = await signed_in(gw, alice, as_operator=True)
    status, out = await o.get("/api/users")
    assert status == 200 and len(out["users"]) == 2
    status, out = await o.get(f"/api/users/{bob}/settings")
    assert status == 200
    await a.close()
    await op.close()
    await o.close()
