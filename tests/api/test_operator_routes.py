"""The operator routes the CLI calls on a running daemon, ported into ``/api`` (issue 29, item 1): the
prompt preview, the memory index's stats and rebuild, erasing a person and the distillation runs.
One operator check for all of them (the token, or a person signed in with the operator role),
another person's data refused, bad JSON a clear 400 that changes nothing."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.testing import message
from tests.api.rig import Client, operator, person, signed_in
from tests.signin.rig import browser
from tests.storage import select_one

# (method, path with {uid}, body): every operator route ported from the hand-written modules.
PORTED = [
    ("POST", "/api/users/{uid}/context", {"message": "where do I live?"}),
    ("GET", "/api/memory/stats", None),
    ("POST", "/api/memory/reindex", {}),
    ("DELETE", "/api/users/{uid}", None),
    ("POST", "/api/users/{uid}/distill/short", {}),
    ("GET", "/api/distill", None),
]


def _url(path: str, uid: str) -> str:
    return path.replace("{uid}", uid)


async def test_only_the_operator_reaches_the_ported_routes(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    nobody, wrong = Client(gw, browser()), Client(gw, browser(), {"Authorization": "Bearer not-the-token-at-all"})
    client, op = await signed_in(gw, alice), operator(gw)
    _, doc = await op.get("/api/openapi.json")
    for method, path, body in PORTED:
        assert doc["paths"][path.replace("distill/short", "distill/{tier}")][method.lower()]["x-operator"] is True
        for who, expected in ((nobody, 401), (wrong, 401), (client, 403)):
            # A person is refused even on their own URL ("me"): the operator's routes are not a person's.
            for uid in (alice, "me"):
                status, err = await who.call(method, _url(path, uid), body)
                assert (status, err["error"]) == (expected, {401: "unauthorized", 403: "forbidden"}[expected]), \
                    (method, path, status, err)  # fmt: skip
    assert gw.state.users.get(alice) is not None  # no refused DELETE erased anything
    for c in (nobody, wrong, client, op):
        await c.close()


async def test_a_person_signed_in_as_operator_passes_the_same_check(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    bob = await person(gw, "bob")
    op = await signed_in(gw, alice, as_operator=True)
    status, stats = await op.get("/api/memory/stats")
    assert status == 200 and f"user:{bob}" in stats["scopes"]
    status, preview = await op.call("POST", f"/api/users/{bob}/context", {"message": "hello again"})
    assert status == 200 and preview["user"] == bob
    # The cookie is an ambient credential: a change without the CSRF token is refused before it runs.
    status, _ = await op.call("POST", "/api/memory/reindex", {}, headers={"X-CSRF-Token": ""})
    assert status == 403
    await op.close()


async def test_prompt_preview_bad_input_is_a_clear_400_and_writes_nothing(gw: Gateway) -> None:
    alice = await person(gw, "alice")
    op = operator(gw)
    sessions = select_one(gw.state, "SELECT COUNT(*) AS n FROM sessions")["n"]
    cases: list[tuple[Any, bytes | None, str]] = [
        (None, b"not json", "body must be JSON"),
        (None, b"[1, 2]", "JSON object"),
        ({}, None, "message"),  # missing
        ({"message": "hi", "user": alice}, None, "user"),  # the old body's field: unknown now
        ({"message": "hi", "tier": 9}, None, "tier"),
        ({"message": "hi", "tier": "2"}, None, "tier"),  # exact types
        ({"message": 5}, None, "message"),
    ]
    for body, raw, word in cases:
        status, err = await op.call("POST", f"/api/users/{alice}/context", body, raw=raw)
        assert (status, err["error"]) == (400, "invalid"), (body, raw, status, err)
        assert word in err["message"], (word, err)
    status, err = await op.call("POST", "/api/users/nobody-at-all/context", {"message": "hi"})
    assert (status, err["error"]) == (404, "not_found")
    status, preview = await op.call("POST", f"/api/users/{alice}/context", {"message": "hi", "tier": 1})
    assert status == 200 and preview["tier"] == 1 and preview["messages"][-1]["content"] == "hi"
    assert preview["session"]["new"] is False  # alice's live session is peeked, not replaced
    assert select_one(gw.state, "SELECT COUNT(*) AS n FROM sessions")["n"] == sessions
    await op.close()


async def test_prompt_preview_refuses_a_key_no_channel_makes_and_reads_any_real_one(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """A channel part no channel has (``$\\x``, ``été``) was previewed, and the context sections built
    for it failed on its memory scope (ScopeError, logged as errors); now it is a 400 saying what is
    wrong. A key a real channel makes that the scope rule refused (a Matrix room on a long server name)
    reads its channel memory with no error."""
    alice = await person(gw, "alice")
    op = operator(gw)
    for body, word in (({"channel": "$\\x", "conversation": "room"}, "channel"),
                       ({"channel": "\u00e9t\u00e9", "conversation": "room"}, "channel"),
                       ({"channel": "matrix", "conversation": "!a\u0000b:example.org"}, "control characters")):
        status, err = await op.call("POST", f"/api/users/{alice}/context", {"message": "hi", **body})
        assert (status, err["error"]) == (400, "invalid") and word in err["message"], (body, status, err)
    room = "!OGEhHVWSdvArJzumhm:" + "chat." * 24 + "example.org"
    assert gw.memory is not None
    gw.memory.stores.for_channel(f"matrix:{room}").write("CHANNEL.md", "# The long room\n- rowing club\n",
                                                          source="test")  # fmt: skip
    with caplog.at_level(logging.WARNING):
        status, preview = await op.call("POST", f"/api/users/{alice}/context",
                                        {"message": "who rows?", "channel": "matrix", "conversation": room})
    assert status == 200, preview
    assert any("rowing club" in s["text"] for s in preview["sections"]), preview["sections"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    await op.close()


async def test_recall_with_kinds_is_the_persons_own_and_the_operators(gw: Gateway) -> None:
    """``kith memory search`` / ``kith sessions search`` ask the person API's recall now (the old
    ``/memory/search`` duplicated it); ``kinds`` narrows it as the sessions search needs."""
    alice, bob = await person(gw, "alice"), await person(gw, "bob")
    gw.memory_store(alice).write("topics/boats.md", "# Boats\n- Alice rows a carbon-fibre boat.\n", source="test")
    await gw.handle_inbound(message("my oar is made of carbon fibre", account="alice"))
    await gw.settle()
    op = operator(gw)
    status, out = await op.get(f"/api/users/{alice}/recall?q=carbon%20fibre&k=100")
    assert status == 200 and {h["kind"] for h in out["hits"]} == {"file", "turn"}
    assert all(h["scope"] == f"user:{alice}" for h in out["hits"])
    status, turns = await op.get(f"/api/users/{alice}/recall?q=carbon%20fibre&kinds=turn")
    assert status == 200 and turns["hits"] and {h["kind"] for h in turns["hits"]} == {"turn"}
    assert all(h["turn_ids"] and h["channel"] == "websocket" for h in turns["hits"])
    for query, word in (("kinds=fact", "fact"), ("k=101", "k"), ("kinds=TURN", "kinds")):
        status, err = await op.get(f"/api/users/{alice}/recall?q=boat&{query}")
        assert (status, err["error"]) == (400, "invalid") and word in err["message"], (query, err)
    # The operator searches a memory folder the users table does not know (files copied in), as
    # `kith memory search` does without a daemon; an id that names nothing is 404.
    (gw.data_dir / "users" / "copied-in").mkdir(parents=True)
    assert await op.get("/api/users/copied-in/recall?q=boat") == (200, {"hits": []})
    status, err = await op.get("/api/users/nobody-at-all/recall?q=boat")
    assert (status, err["error"]) == (404, "not_found")
    client = await signed_in(gw, bob)
    status, err = await client.get(f"/api/users/{alice}/recall?q=carbon&kinds=turn")
    assert (status, err["error"]) == (404, "not_found")  # another person's memory: as if alice did not exist
    await client.close()
    await op.close()


async def test_reindex_and_erase_keep_what_the_cli_relied_on(gw: Gateway) -> None:
    alice, bob = await person(gw, "alice"), await person(gw, "bob")
    op = operator(gw)
    status, out = await op.call("POST", "/api/memory/reindex", {"user": alice})
    assert status == 202 and out == {"queued": [f"user:{alice}"]}
    status, out = await op.call("POST", "/api/memory/reindex", {})
    assert status == 202 and {f"user:{alice}", f"user:{bob}"} <= set(out["queued"])
    for body in ({"user": "../etc"}, {"user": 5}, {"users": alice}):
        status, err = await op.call("POST", "/api/memory/reindex", body)
        assert (status, err["error"]) == (400, "invalid"), (body, err)

    status, err = await op.call("DELETE", "/api/users/nobody-at-all")
    assert (status, err["error"]) == (404, "not_found") and "nobody-at-all" in err["message"]
    status, err = await op.call("DELETE", f"/api/users/{bob}?missing_ok=perhaps")
    assert (status, err["error"]) == (400, "invalid") and gw.state.users.get(bob) is not None
    status, report = await op.call("DELETE", f"/api/users/{bob}")
    assert status == 200 and report["user_id"] == bob and report["rows"] and report["warnings"] == []
    assert gw.state.users.get(bob) is None and not (gw.data_dir / "users" / bob).exists()
    # Gone from the table and the files: only missing_ok runs the steps again (an erase whose index
    # step failed), as `kith users delete` does for an id it no longer finds.
    status, _ = await op.call("DELETE", f"/api/users/{bob}")
    assert status == 404
    status, report = await op.call("DELETE", f"/api/users/{bob}?missing_ok=true")
    assert status == 200 and report["files"] == 0
    assert gw.state.users.get(alice) is not None
    await op.close()
