"""Memory hygiene (issue 18, seed 001): the weekly job proposes, the person decides.

Nothing changes before acceptance; accepting applies exactly the stored proposal through the guarded
store with an audit line; rejecting drops it for good; a file changed since the proposal makes it
stale; another person can neither see nor accept it. Driven through the real surfaces: ``/tidy`` in
a direct conversation, the person API with a signed-in session, the job as the bus registers it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from gateway.app import Gateway
from gateway.memory.hygiene import proposals as stored
from gateway.memory.hygiene.run import run_hygiene
from gateway.testing import ConfigFactory, message
from gateway.util.jsonl import json_objects
from tests.api.rig import person, signed_in
from tests.fakes.anthropic import FakeAnthropic
from tests.signin.rig import daemon

SAM = "# Sam Reed\n\nClimbs on Saturdays.\n\n## Aliases\n- Sammy\n"
SAMMY = "# Sammy\n\nWorks at the [boat club](../topics/boats.md); sister [Dee](dee.md).\n"
HIKING = "# Hiking\n\nWent up Snowdon with [Sammy](../people/telegram-42.md#aliases) and [Dee](../people/dee.md).\n"
USER = "# Alice\n\n- Lives in Leeds.\n- Lives in York since March.\n- Likes tea.\n"
HYGIENE_MARK = "You tidy a personal assistant's memory"


def tree(root: Path, *, log: bool = False) -> dict[str, str]:
    """Every file of the person's notes but the store's own (.audit, .locks, .index, .hygiene) and the
    session log: the test's own ``/tidy`` commands are answered turns, which the session writer appends
    to ``sessions/`` on its own schedule (a batch every half second), so the log may appear between any
    two snapshots. Hygiene never proposes changes to it. ``log=True`` keeps it, for a test that has let
    the writer settle first."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
            and (log or p.relative_to(root).parts[0] != "sessions")}


def seed(gw: Gateway, uid: str) -> None:
    store = gw.memory_store(uid)
    store.write("people/sam.md", SAM, source="test")
    store.write("people/telegram-42.md", SAMMY, source="test")
    store.write("people/dee.md", "# Dee\n\n[Sam](sam.md)'s sister.\n", source="test")
    store.write("people/_aliases.json", json.dumps({"sammy": "telegram-42", "dee": "dee"}), source="test")
    store.write("topics/hiking.md", HIKING, source="test")
    store.write("topics/boats.md", "# Boats\n\nThe club [Sam](../people/sam.md) rows at.\n", source="test")
    store.write("USER.md", USER, source="test")


def judge(body: dict[str, Any]) -> str | None:
    system = body.get("system", "")
    text = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)
    if HYGIENE_MARK not in text:
        return None
    return json.dumps({"proposals": [
        {"kind": "conflict", "file": "USER.md", "lines": [3, 4], "why": "Both cannot be true.",
         "replace_with": "- Lives in York (moved from Leeds in March)."},
        {"kind": "stale", "file": "USER.md", "lines": [99], "why": "points at nothing: dropped"},
        {"kind": "stale", "file": "../bob/USER.md", "lines": [1], "why": "outside: dropped"},
    ]})


async def tidy(gw: Gateway, text: str, account: str = "alice") -> str:
    reply = await gw.handle_inbound(message(text, account=account))
    assert reply is not None
    return reply.text


async def test_merge_is_proposed_shown_and_applied_only_on_accept(
    kith_config: ConfigFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    fake_anthropic.responders.append(judge)
    async with daemon(kith_config(llm=anthropic_llm, memory={"recall_k": 0})) as gw:
        alice = await person(gw, "alice")
        seed(gw, alice)
        store = gw.memory_store(alice)
        before = tree(store.root)

        report = await run_hygiene(gw, alice)
        assert report.model == "used" and len(report.errors) == 2  # the two unusable findings were dropped
        kinds = sorted(p.kind for p in report.added)
        assert kinds == ["conflict", "merge"]
        assert tree(store.root) == before  # proposing changes nothing
        again = await run_hygiene(gw, alice)
        assert again.added == [] and again.pending == 2  # the same findings are not proposed twice

        listing = await tidy(gw, "/tidy")
        assert "2 tidy-up proposal(s)" in listing and "Merge people/telegram-42.md into people/sam.md" in listing
        merge_no = 1 if "1. [merge]" in listing else 2
        shown = await tidy(gw, f"/tidy show {merge_no}")
        assert "people/telegram-42.md (delete)" in shown and "topics/hiking.md (edit)" in shown
        assert tree(store.root) == before

        merge = next(p for p in stored.pending(store.root) if p.kind == "merge")
        answer = await tidy(gw, f"/tidy accept {merge_no}")
        assert answer.startswith("Done: Merge people/telegram-42.md into people/sam.md")

        # Exactly the proposal: every changed file holds the stored text, the merged file is gone,
        # nothing else moved.
        after = tree(store.root)
        for change in merge.changes:
            if change.after is None:
                assert not (store.root / change.path).exists()
            else:
                assert store.read(change.path) == change.after
        untouched = {k for k in before if k not in merge.paths}
        assert {k: after[k] for k in untouched} == {k: before[k] for k in untouched}
        sam = store.read("people/sam.md")
        assert "## Merged from people/telegram-42.md" in sam and "[boat club](../topics/boats.md)" in sam
        assert "(../people/sam.md#aliases)" in store.read("topics/hiking.md")  # link re-pointed, fragment kept
        assert json.loads(store.read("people/_aliases.json"))["sammy"] == "sam"
        audit = [r for r in json_objects((store.root / ".audit.jsonl").read_text()) if r["message_id"] == merge.id]
        assert sorted(r["file"] for r in audit) == sorted(merge.paths)
        assert {r["source"] for r in audit} == {"hygiene:person"}
        assert {r["op"] for r in audit if r["file"] == "people/telegram-42.md"} == {"delete"}

        # The conflict is still waiting; now it is number 1.
        assert "1. [conflict]" in await tidy(gw, "/tidy")


async def test_reject_drops_and_a_stale_proposal_changes_nothing(
    kith_config: ConfigFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    fake_anthropic.responders.append(judge)
    async with daemon(kith_config(llm=anthropic_llm, memory={"recall_k": 0})) as gw:
        alice = await person(gw, "alice")
        bob = await person(gw, "bob")
        seed(gw, alice)
        store = gw.memory_store(alice)
        await run_hygiene(gw, alice)
        pending = {p.kind: p for p in stored.pending(store.root)}
        client = await signed_in(gw, alice)
        intruder = await signed_in(gw, bob)
        try:
            # Another person sees nothing and can decide nothing: 404, as for a user that does not exist.
            for method, path in (("GET", f"/api/users/{alice}/hygiene"),
                                 ("POST", f"/api/users/{alice}/hygiene/{pending['merge'].id}/accept"),
                                 ("POST", f"/api/users/{alice}/hygiene/{pending['merge'].id}/reject"),
                                 ("POST", f"/api/users/{alice}/hygiene/run")):
                status, _ = await intruder.call(method, path)
                assert status == 404, (method, path)
            status, mine = await intruder.get("/api/users/me/hygiene")
            assert status == 200 and mine["proposals"] == []
            # Bob's own /tidy never shows Alice's proposals either.
            assert "Nothing to tidy" in await tidy(gw, "/tidy", account="bob")
            assert "No pending proposal" in await tidy(gw, f"/tidy accept {pending['merge'].id}", account="bob")
            assert len(stored.pending(store.root)) == 2

            status, listing = await client.get("/api/users/me/hygiene")
            assert status == 200 and [p["number"] for p in listing["proposals"]] == [1, 2]
            conflict = next(p for p in listing["proposals"] if p["kind"] == "conflict")
            change = conflict["changes"][0]
            assert change["action"] == "edit" and "York (moved from Leeds" in change["after"]

            before = tree(store.root)
            status, out = await client.call("POST", f"/api/users/me/hygiene/{conflict['id']}/reject")
            assert status == 200 and out["status"] == "rejected" and out["changed"] == []
            assert tree(store.root) == before and store.read("USER.md") == USER
            assert (await run_hygiene(gw, alice)).added == []  # a rejected finding is not proposed again

            # The merge goes stale: Sammy's file is edited after the proposal was made.
            store.write("people/telegram-42.md", SAMMY + "- new line\n", source="test")
            before = tree(store.root)
            status, err = await client.call("POST", f"/api/users/me/hygiene/{pending['merge'].id}/accept")
            assert status == 409 and err["error"] == "conflict"
            assert tree(store.root) == before
            status, listing = await client.get("/api/users/me/hygiene")
            assert {p["status"] for p in listing["proposals"]} == {"rejected", "failed"}
            status, _ = await client.call("POST", f"/api/users/me/hygiene/{pending['merge'].id}/accept")
            assert status == 404  # decided: nothing to accept any more
        finally:
            await client.close()
            await intruder.close()


async def test_the_weekly_job_is_per_person_and_off_the_record_accepts_nothing(
    kith_config: ConfigFactory,
) -> None:
    async with daemon(kith_config(memory={"recall_k": 0}, background={"hygiene": {"use_model": False}})) as gw:
        spec = next(s for s in gw.registrations.jobs.values() if s.name == "memory_hygiene")
        assert spec.cron == "0 5 * * 0" and spec.per_user
        alice = await person(gw, "alice")
        seed(gw, alice)
        await tidy(gw, "/tidy run")
        assert len(stored.pending(gw.memory_store(alice).root)) == 1  # the merge only: no model asked
        await tidy(gw, "/otr on")
        await gw.settle()  # the on-the-record commands are in the session log before the snapshot
        before = tree(gw.memory_store(alice).root, log=True)
        assert "Off-The-Record" in await tidy(gw, "/tidy accept 1")
        await gw.settle()
        assert tree(gw.memory_store(alice).root, log=True) == before  # nothing applied, nothing logged
        reply = await gw.handle_inbound(message("/tidy", account="alice", group="book-club"))
        assert reply is not None and "only in a direct conversation" in reply.text


PATTERNS = ("# Patterns\n\n- Prefers mornings for calls.\n- Trip bookings: trains over flights when under six hours.\n"
            "- Trip bookings: an aisle seat, and the hotel within walking distance of the station.\n")
SCRATCH = "# Scratch\n\n- buy stamps\n- compost: turn the heap weekly\n- compost: no citrus peel\n"


def judge_notes(body: dict[str, Any]) -> str | None:
    system = body.get("system", "")
    text = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)
    if HYGIENE_MARK not in text:
        return None
    return json.dumps({"proposals": [
        {"kind": "playbook", "file": "PATTERNS.md", "lines": [4, 5], "to": "playbooks/trip-bookings.md",
         "title": "Trip bookings", "why": "The same way every time: a procedure."},
        {"kind": "promote", "file": "SCRATCH.md", "lines": [4, 5], "to": "topics/compost.md", "title": "Compost",
         "why": "Two notes on one subject."},
        {"kind": "playbook", "file": "people/sam.md", "lines": [3], "to": "playbooks/sam.md", "title": "Sam",
         "why": "a person is not a procedure: dropped"},
        {"kind": "playbook", "file": "PATTERNS.md", "lines": [3], "to": "topics/calls.md", "title": "Calls",
         "why": "a playbook goes to playbooks/: dropped"},
    ]})


async def test_scratch_lines_are_promoted_to_a_topic_and_a_pattern_to_a_playbook(
    kith_config: ConfigFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any]
) -> None:
    """Seed 004: playbooks are written by hand or promoted by hygiene from repeated patterns; seed 001:
    housekeeping proposes promoting notes to files of their own. Accepted, the playbook is recalled
    by relevance like a hand-written one, and its lines leave the always-loaded PATTERNS.md."""
    fake_anthropic.responders.append(judge_notes)
    async with daemon(kith_config(llm=anthropic_llm, memory={"recall_k": 0})) as gw:
        alice = await person(gw, "alice")
        store = gw.memory_store(alice)
        store.write("PATTERNS.md", PATTERNS, source="test")
        store.write("SCRATCH.md", SCRATCH, source="test")
        store.write("people/sam.md", SAM, source="test")
        before = tree(store.root)

        report = await run_hygiene(gw, alice)
        assert sorted(p.kind for p in report.added) == ["playbook", "promote"] and len(report.errors) == 2
        assert tree(store.root) == before  # proposing changes nothing
        await gw.handle_inbound(message("Can you sort out the trip bookings for Oslo?", account="alice"))
        assert "(their playbooks)" not in fake_anthropic.system_of(fake_anthropic.last_turn())

        listing = await tidy(gw, "/tidy")
        assert "Make a playbook of 2 line(s) of PATTERNS.md: playbooks/trip-bookings.md" in listing
        playbook = next(p for p in stored.pending(store.root) if p.kind == "playbook")
        number = 1 if "1. [playbook]" in listing else 2
        assert (await tidy(gw, f"/tidy accept {number}")).startswith("Done: Make a playbook")

        assert store.read("playbooks/trip-bookings.md") == (
            "# Trip bookings\n\n- Trip bookings: trains over flights when under six hours.\n"
            "- Trip bookings: an aisle seat, and the hotel within walking distance of the station.\n")
        assert store.read("PATTERNS.md") == "# Patterns\n\n- Prefers mornings for calls.\n"  # moved, not copied
        assert store.read("SCRATCH.md") == SCRATCH and not store.exists("topics/compost.md")  # still pending
        audit = [r for r in json_objects((store.root / ".audit.jsonl").read_text()) if r["message_id"] == playbook.id]
        assert sorted(r["file"] for r in audit) == ["PATTERNS.md", "playbooks/trip-bookings.md"]

        # The playbook stage finds it by relevance: the trip question carries it, another does not.
        await gw.handle_inbound(message("Book the trip to Oslo, please.", account="alice"))
        system = fake_anthropic.system_of(fake_anthropic.last_turn())
        assert "(their playbooks)" in system and "an aisle seat" in system
        await gw.handle_inbound(message("What should I cook tonight?", account="alice"))
        assert "an aisle seat" not in fake_anthropic.system_of(fake_anthropic.last_turn())

        # The notes promotion: accepted, the lines move to a topic file of their own.
        assert (await tidy(gw, "/tidy accept 1")).startswith("Done: Move 2 line(s) of SCRATCH.md")
        compost = "# Compost\n\n- compost: turn the heap weekly\n- compost: no citrus peel\n"
        assert store.read("topics/compost.md") == compost
        assert store.read("SCRATCH.md") == "# Scratch\n\n- buy stamps\n"
