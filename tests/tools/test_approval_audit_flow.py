"""Issue 32, "every action, approved or denied, is written to an audit the console shows": a real
approval flow (the scripted model calls a third-party plugin's acting tool, people answer in chat) on
SQLite and on PostgreSQL. Approved then done, denied, another person's answer refused, one expired with
nobody answering (the daemon's timer), one left waiting when the daemon stops and expired while it was
down: all in the persisted audit after a restart, read through ``/api/approvals`` (operator only,
filtered, paged) and ``/api/users/me/approvals`` (a person's own, and only theirs)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.app import Gateway
from gateway.state import ts
from gateway.tools import approvals
from tests.api.rig import Client, operator, signed_in
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.signin.rig import browser
from tests.storage import select_rows, write_rows
from tests.tools.test_approvals import Outbox, ask, say


async def _until_expired(gw: Gateway, approval_id: str) -> None:
    for _ in range(200):  # bounded: the timer fires about 10 ms after the expiry
        if any(e.approval_id == approval_id for e in gw.state.approval_audit.page(outcome="expired")):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"approval {approval_id} was not audited as expired")


async def test_every_step_is_in_the_persisted_audit_after_a_restart(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],
        state_url: str | None) -> None:  # fmt: skip
    outbox = Outbox()
    settings: dict[str, Any] = {"llm": anthropic_llm, "memory": {"recall_k": 0}, "plugins": (outbox,),
                                "state": {"url": state_url} if state_url else {}}  # fmt: skip
    gw = await make_gateway(**settings)

    done = await ask(gw, fake_anthropic, {"to": "bob", "text": "lunch at 1?"})
    assert (await say(gw, f"/approve {done}")) == "sent to bob"
    denied = await ask(gw, fake_anthropic, {"to": "carol", "text": "hi"})
    assert "no pending approval" in await say(gw, f"/approve {denied}", account="bob"), "not bob's to answer"
    assert (await say(gw, f"/deny {denied}")).startswith("Denied")
    # Nobody answers this one: the daemon's timer audits its expiry when its time is up.
    expired = await ask(gw, fake_anthropic, {"to": "dan", "text": "hi"})
    book = approvals(gw)
    book._pending[expired] = replace(book._pending[expired], expires_at=time.time())  # its ten minutes are up
    book._arm()
    await _until_expired(gw, expired)
    assert expired not in book._pending
    # This one still waits when the daemon stops; its time runs out while no daemon runs.
    left = await ask(gw, fake_anthropic, {"to": "erin", "text": "hi"})
    bobs = await ask_as(gw, fake_anthropic, "bob", {"to": "fay", "text": "hello"})
    write_rows(gw.state, "UPDATE approval_audit SET expires_at=? WHERE approval_id=?",
               ts(datetime.now(UTC) - timedelta(minutes=1)), left)  # fmt: skip
    alice, bob = gw.identities.lookup("websocket", "alice"), gw.identities.lookup("websocket", "bob")
    assert alice is not None and bob is not None
    gw.state.users.set_display_name(alice, "Alice")  # as her settings would (the console shows names)
    assert outbox.sent == [("bob", "lunch at 1?")]
    await gw.close()

    gw = await make_gateway(**settings)  # the same data dir and database: a restart
    steps = [(e.approval_id, e.outcome, e.user_id) for e in gw.state.approval_audit.page()][::-1]
    assert steps == [
        (done, "requested", alice), (done, "approved", alice), (done, "done", alice),
        (denied, "requested", alice), (denied, "refused", alice), (denied, "denied", alice),
        (expired, "requested", alice), (expired, "expired", alice),
        (left, "requested", alice), (bobs, "requested", bob),
        (left, "expired", alice),  # audited by the restarted daemon's start, not by anyone answering
    ]
    assert "no pending approval" in await say(gw, f"/approve {left}"), "a restart drops what waited"
    entries = gw.state.approval_audit.page(user_id=alice)
    assert {e.summary for e in entries if e.approval_id == done} == {"Send 'lunch at 1?' to bob."}
    assert [e.note for e in entries if e.outcome == "refused"] == ["another person answered"]
    # The summary the person was shown, never the tool's input as the model sent it.
    rows = select_rows(gw.state, "SELECT * FROM approval_audit")
    assert rows and not [r for r in rows if any('"to"' in str(v) or "'to':" in str(v) for v in r)]

    await _api(gw, alice, bob, done=done, denied=denied, expired=expired, left=left, bobs=bobs)


async def ask_as(gw: Gateway, fake: FakeAnthropic, account: str, args: dict[str, Any]) -> str:
    from tests.tools.test_approvals import dm

    fake.enqueue_tool_use("send_note", args)
    fake.enqueue("asked")
    await gw.handle_inbound(dm("send it", account=account))
    (result,) = fake.tool_results()
    text = str(result["content"])
    start = text.index("/approve ") + len("/approve ")
    return text[start:start + 6]


async def _api(gw: Gateway, alice: str, bob: str, **ids: str) -> None:
    op = operator(gw)
    status, page = await op.get("/api/approvals")
    assert status == 200 and page["next_before"] is None
    assert len(page["entries"]) == 11 and page["entries"][0]["outcome"] == "expired"
    first = page["entries"][-1]
    assert (first["approval_id"], first["outcome"], first["tool"], first["display_name"]) == \
        (ids["done"], "requested", "send_note", "Alice")  # fmt: skip
    assert first["summary"] == "Send 'lunch at 1?' to bob."
    ids_newest_first = [e["id"] for e in page["entries"]]
    assert ids_newest_first == sorted(ids_newest_first, reverse=True)

    # Filters, and pages that add up to the whole list.
    _, refused = await op.get("/api/approvals?outcome=refused")
    assert [(e["approval_id"], e["note"]) for e in refused["entries"]] == [(ids["denied"], "another person answered")]
    _, bobs = await op.get(f"/api/approvals?user={bob}")
    assert [(e["approval_id"], e["outcome"]) for e in bobs["entries"]] == [(ids["bobs"], "requested")]
    _, expired = await op.get(f"/api/approvals?user={alice}&outcome=expired")
    assert [e["approval_id"] for e in expired["entries"]] == [ids["left"], ids["expired"]]
    seen, before = [], ""
    for _ in range(10):
        status, part = await op.get(f"/api/approvals?limit=4{before}")
        assert status == 200 and len(part["entries"]) <= 4
        seen += [e["id"] for e in part["entries"]]
        if part["next_before"] is None:
            break
        before = f"&before={part['next_before']}"
    assert seen == ids_newest_first
    for bad in ("outcome=maybe", "limit=0", "limit=201", "before=0", "before=x"):
        status, err = await op.get(f"/api/approvals?{bad}")
        assert (status, err["error"]) == (400, "invalid"), bad

    # A person reads their own entries and nobody else's; the operator's list is the operator's.
    client = await signed_in(gw, alice)
    status, mine = await client.get("/api/users/me/approvals")
    assert status == 200 and len(mine["entries"]) == 10 and {e["user_id"] for e in mine["entries"]} == {alice}
    _, mine_denied = await client.get("/api/users/me/approvals?outcome=denied")
    assert [e["approval_id"] for e in mine_denied["entries"]] == [ids["denied"]]
    assert (await client.get(f"/api/users/{bob}/approvals"))[0] == 404
    for path in ("/api/approvals", f"/api/approvals?user={bob}"):
        status, err = await client.get(path)
        assert (status, err["error"]) == (403, "forbidden"), path
    nobody = Client(gw, browser())
    assert (await nobody.get("/api/approvals"))[0] == 401
    assert (await nobody.get("/api/users/me/approvals"))[0] == 401
    # The operator may read one person's through the person route too (as every person route allows).
    _, via_person = await op.get(f"/api/users/{bob}/approvals")
    assert [e["approval_id"] for e in via_person["entries"]] == [ids["bobs"]]
    for c in (op, client, nobody):
        await c.close()
