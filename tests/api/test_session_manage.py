"""Past conversations managed through the API: renamed, continued, exported, deleted (gone from the
transcript, both searches, the session log and the index, derived facts kept), never someone else's."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.app import Gateway
from gateway.memory.files.scopes import user_scope
from gateway.testing import message
from gateway.types import UserRef
from tests.api.rig import person, signed_in
from tests.signin.rig import url


async def test_a_past_conversation_renamed_continued_exported_and_deleted(gw: Gateway) -> None:
    alice = await person(gw, "alice")  # session 1: "hello"
    await gw.handle_inbound(message("we paddled the kayak across the fjord", account="alice"))
    await gw.handle_inbound(message("/new", account="alice"))
    await gw.handle_inbound(message("my sourdough starter needs feeding", account="alice"))
    bob = await person(gw, "bob")
    await gw.settle()
    client = await signed_in(gw, alice)
    status, out = await client.get("/api/users/me/sessions")
    newest, oldest = (s["session_id"] for s in out["sessions"])
    assert out["sessions"][1]["renamed"] is False

    # Rename; an empty title is the first message again.
    status, renamed = await client.call("PATCH", f"/api/users/me/sessions/{oldest}", {"title": "  Fjord   trip "})
    assert status == 200 and renamed["title"] == "Fjord trip" and renamed["renamed"] is True
    status, out = await client.get("/api/users/me/sessions")
    assert [s["title"] for s in out["sessions"]] == ["my sourdough starter needs feeding", "Fjord trip"]
    status, back = await client.call("PATCH", f"/api/users/me/sessions/{oldest}", {"title": ""})
    assert back["title"] == "hello" and back["renamed"] is False
    await client.call("PATCH", f"/api/users/me/sessions/{oldest}", {"title": "Fjord trip"})

    # Export: the messages as Markdown, oldest first, as a download.
    async with client.http.get(url(gw, f"/api/users/me/sessions/{oldest}/export"), headers=client.headers) as resp:
        assert resp.status == 200 and resp.content_type == "text/markdown"
        assert "attachment" in resp.headers["Content-Disposition"]
        text = await resp.text()
    assert text.startswith("# Fjord trip\n")
    assert text.index("hello") < text.index("we paddled the kayak across the fjord")

    # Continue: the old conversation is the open one; the next message lands in it, with its history.
    status, cont = await client.call("POST", f"/api/users/me/sessions/{oldest}/continue")
    assert status == 200 and cont["open"] is True
    await gw.handle_inbound(message("and the kayak was red", account="alice"))
    await gw.settle()
    status, out = await client.get("/api/users/me/sessions")
    by_id = {s["session_id"]: s for s in out["sessions"]}
    assert by_id[oldest]["open"] and not by_id[newest]["open"] and by_id[oldest]["turns"] == 3
    now = datetime.now(UTC)
    history = gw.sessions.history(gw.sessions.peek(UserRef(user_id=alice), message("x", account="alice"), now))
    assert [h.content for h in history if h.role == "user"][-2:] == ["we paddled the kayak across the fjord",
                                                                      "and the kayak was red"]

    # Delete: gone from the list, both searches, the transcript, the session log and the index.
    # A fact the memory writer learned from it stays (derived memory is the person's; counted, not taken).
    gw.kg.add(alice, "alice", "owns", "a red kayak", source_type="memory_writer", source_ref=f"writer:{oldest}:1-2")
    status, found = await client.get("/api/users/me/sessions?q=kayak")
    assert [s["session_id"] for s in found["sessions"]] == [oldest]
    status, gone = await client.call("DELETE", f"/api/users/me/sessions/{oldest}")
    assert status == 200 and gone["messages"] == 6 and gone["facts_kept"] == 1, gone
    assert [f.object for f in gw.kg.all(alice)] == ["a red kayak"]
    status, out = await client.get("/api/users/me/sessions")
    assert [s["session_id"] for s in out["sessions"]] == [newest]
    for q in ("/api/users/me/sessions?q=kayak", "/api/users/me/sessions?q=kayak+paddled&mode=semantic"):
        status, found = await client.get(q)
        assert status == 200 and oldest not in [s["session_id"] for s in found["sessions"]], (q, found)
    status, found = await client.get("/api/users/me/sessions/search?q=kayak")
    assert status == 200 and found["days"] == []
    assert gw.state.turns.after(oldest, 0) == [] and gw.state.sessions.get(oldest) is None
    assert gw.state.turns.search_sessions(alice, "kayak") == []
    store = gw.memory.stores.for_user(alice)
    logs = "".join(store.read(e.path) for e in store.files("sessions"))
    assert "kayak" not in logs and "sourdough" in logs  # the other conversation's blocks stay
    hits = await gw.memory.recall(scope=user_scope(alice), query="kayak fjord paddled", k=20, kinds=("turn",))
    assert all("kayak" not in h.text for h in hits), [h.text for h in hits]
    status, _ = await client.get(f"/api/users/me/sessions/{oldest}/messages")
    assert status == 404

    # Never someone else's conversation: 404 for every verb.
    bob_sid = gw.state.sessions.open_in(f"user:{bob}").session_id
    for method, path, body in (("PATCH", f"/api/users/me/sessions/{bob_sid}", {"title": "x"}),
                               ("POST", f"/api/users/me/sessions/{bob_sid}/continue", None),
                               ("GET", f"/api/users/me/sessions/{bob_sid}/export", None),
                               ("DELETE", f"/api/users/me/sessions/{bob_sid}", None),
                               ("DELETE", f"/api/users/{bob}/sessions/{bob_sid}", None)):  # fmt: skip
        status, err = await client.call(method, path, body) if method != "GET" else (
            (await client.http.get(url(gw, path), headers=client.headers)).status, None)
        assert status == 404, (method, path, err)
    assert gw.state.turns.after(bob_sid, 0)
    await client.close()
