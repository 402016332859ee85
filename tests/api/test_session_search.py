"""Session search with excerpts through the real HTTP API (seed 000): highlighted excerpts grouped by
date, filtered by persona, folded like the full-text index, and a person's own sessions only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.app import Gateway
from gateway.personas import bootstrap, persona_store
from gateway.testing import message
from tests.api.rig import operator, person, signed_in


async def test_excerpts_grouped_by_date_highlighted_filtered_by_persona_and_private(gw: Gateway) -> None:
    bootstrap(persona_store(gw, "developer"), "developer", template="developer")
    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    day1, day2 = noon - timedelta(days=3), noon - timedelta(days=2)
    long_text = "filler words here " * 20 + "we paddled the Kayak across the fjord" + " and more after" * 20
    await gw.handle_inbound(message(long_text, account="alice", at=day1))
    alice = gw.identities.lookup("websocket", "alice")
    assert alice is not None
    await gw.handle_inbound(message("/persona developer", account="alice", at=day2))
    await gw.handle_inbound(message("the kayak rack needs one bolt", account="alice", at=day2 + timedelta(minutes=5)))
    await person(gw, "bob")
    await gw.handle_inbound(message("kayak rentals near me?", account="bob"))
    client = await signed_in(gw, alice)

    status, out = await client.get("/api/users/me/sessions/search?q=KAYAK")
    assert status == 200, out
    dates = [d["date"] for d in out["days"]]
    assert dates == sorted(dates, reverse=True), "newest day first"
    # The person's words on the day they said them (a reply is stamped when it was given: today).
    said = {d["date"]: [e for e in d["excerpts"] if e["role"] == "user"] for d in out["days"]}
    newest, oldest = said[day2.strftime("%Y-%m-%d")], said[day1.strftime("%Y-%m-%d")]
    assert [e["text"] for e in newest] == ["the kayak rack needs one bolt"] and newest[0]["persona"] == "developer"
    assert newest[0]["time"] == "12:05" and newest[0]["highlights"] == [[4, 9]]
    [long_hit] = oldest
    assert long_hit["persona"] == "kith" and long_hit["text"].startswith("…") and long_hit["text"].endswith("…")
    assert len(long_hit["text"]) <= 242 and "\n" not in long_hit["text"]
    assert [long_hit["text"][s:e] for s, e in long_hit["highlights"]] == ["Kayak"]
    for day in out["days"]:
        seqs = [e["seq"] for e in day["excerpts"]]
        assert seqs == sorted(seqs), "in the order they were said within a day"

    # persona= keeps one persona's sessions; accents are folded as the index folds them.
    status, out = await client.get("/api/users/me/sessions/search?q=kayak&persona=developer")
    assert status == 200 and out["days"]
    assert {e["persona"] for d in out["days"] for e in d["excerpts"]} == {"developer"}
    assert day1.strftime("%Y-%m-%d") not in [d["date"] for d in out["days"]]
    status, out = await client.get("/api/users/me/sessions/search?q=fj%C3%B6rd+paddled")
    hit = next(e for d in out["days"] for e in d["excerpts"] if e["role"] == "user")
    assert sorted(hit["text"][s:e] for s, e in hit["highlights"]) == ["fjord", "paddled"]

    # Only the person's own: Bob's words are not found, Bob's search is not reachable; the operator's is.
    status, out = await client.get("/api/users/me/sessions/search?q=rentals")
    assert status == 200 and out["days"] == []
    bob = gw.identities.lookup("websocket", "bob")
    status, _ = await client.get(f"/api/users/{bob}/sessions/search?q=kayak")
    assert status == 404
    op = operator(gw)
    status, out = await op.get(f"/api/users/{alice}/sessions/search?q=bolt")
    assert status == 200 and [e["text"] for d in out["days"] for e in d["excerpts"] if e["role"] == "user"] == [
        "the kayak rack needs one bolt"]
    for bad in ("", "?q=", "?q=kayak&persona=Not%20A%20Name", "?q=kayak&limit=0", "?q=" + "x" * 501):
        status, err = await client.get(f"/api/users/me/sessions/search{bad}")
        assert status == 400 and err["error"] == "invalid", (bad, err)
    await client.close()
    await op.close()
