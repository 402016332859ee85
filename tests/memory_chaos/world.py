"""The world a model-chaos run happens in: a real gateway whose every model role is the fake
OpenAI-compatible server (at the wire, through the real ``openai`` client), a person with a memory
worth keeping, and the checks of issue 28's guarantees.

Each run gets a person of its own (a fresh account, so a fresh tree and session), talks three turns,
then one stage asks the model and gets the misbehaviour's answers. Then:

* **no line lost**: every line of every file the person had is still there, or the file's audit has
  a run that removed it and undoing that run (curation's rollback, newest first) gives the file back
  byte for byte;
* **a failed run writes nothing**: a stage that raised (so the bus retries it) left the tree as it
  was and its watermark where it was;
* **bounded**: the stage made at most ``MAX_RETRIES + 1`` requests per model call;
* **no injected instruction** reaches a Markdown file (the poisoning screen quarantines it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import count
from typing import Any

from gateway.app import Gateway
from gateway.memory.background import jobscope
from gateway.memory.curation import audit, rollback
from gateway.memory.curation.doc import norm
from gateway.memory.files import working
from gateway.testing import GatewayFactory, message
from tests.background.conftest import FAST_BUS
from tests.fakes.openai_server import API_KEY, FakeOpenAI
from tests.memory_chaos.misbehave import INJECTED, MAX_RETRIES, TIMEOUT_S

SECTIONS = ("Family", "Work", "Health", "Places")
PEOPLE_LINES = [f"{s} note {i}: a detail about Ada that took weeks to learn, number {i:02d}."
                for s in SECTIONS for i in range(10)]  # fmt: skip
TOPIC_LINES = [f"Sailing fact {i:02d}: the boat Lotte, her rigging and the harbour in Kiel, item {i:02d}."
               for i in range(20)]  # fmt: skip
USER_LINES = {"Identity": ["Ada Lind, a marine engineer.", "Lives in Kiel since 2019.", "Born in Malmo."],
              "Work": ["Designs hull sensors at Nordwerft.", "Works from home on Fridays."],
              "Preferences": ["Prefers short answers.", "Drinks lapsang souchong.", "Dislikes phone calls."]}
PATTERN_LINES = ["Sails every Saturday morning in summer.", "Plans trips on Sunday evenings."]
LONG_LINES = [f"Long-term: year {2015 + i}, Ada {what}." for i, what in enumerate(
    ("bought the Lotte", "moved to Kiel", "joined Nordwerft", "crossed to Bornholm", "rebuilt the engine",
     "met Ben at the club", "raced the Kiel week", "learned Danish", "repainted the hull", "led the club"))]
MID_LINES = ["Ada is planning a summer trip.", "The keel needs work.", "Ben may come along."]
SCRATCH_LINES = ["call the sailmaker about the jib", "jib costs 900 EUR", "sailmaker closes in August",
                 "buy milk"]
WORKING_LINES = ["## Working on", "- Choosing a new jib for the Lotte.", "## Open threads",
                 "- Ask Ben about May."]
MEMORY_LINES = ["Ada checked the mooring lines.", "Ada ordered new fenders."]


def _section(title: str, lines: list[str]) -> str:
    return f"\n## {title}\n" + "".join(f"- {ln}\n" for ln in lines)


def seed_files(slug: str) -> dict[str, str]:
    """A person's memory: profile, patterns, a 40-line people note, a 20-line topic note, tiers,
    scratch notes and a dated memory file."""
    return {
        "USER.md": "# Ada\n" + "".join(_section(s, lines) for s, lines in USER_LINES.items()),
        "PATTERNS.md": "# Patterns\n" + _section("Routines", PATTERN_LINES),
        f"people/{slug}.md": "# Ada\n" + "".join(_section(s, PEOPLE_LINES[k * 10:k * 10 + 10])
                                                 for k, s in enumerate(SECTIONS)),
        "topics/sailing.md": "# Sailing\n" + _section("Boat", TOPIC_LINES),
        "MEMORY_MID.md": "# Mid-term memory\n" + _section("Themes", MID_LINES),
        "MEMORY_LONG.md": "# Long-term memory\n" + _section("History", LONG_LINES),
        "SCRATCH.md": "# Scratch\n\n" + "".join(f"- {ln}\n" for ln in SCRATCH_LINES),
        "memories/2026-01-05.md": "# Memories 2026-01-05\n" + _section("Night of 2026-01-05T03:00", MEMORY_LINES),
    }


TURNS = ("I'm sailing the Lotte from Kiel to Copenhagen in May.", "Before that the keel needs checking.",
         "Ben might come along.")  # fmt: skip


def chaos_llm(fake: FakeOpenAI) -> dict[str, Any]:
    """Every role on the fake; ``cheap`` named under roles, so the recall filter tier is on."""
    role = {"provider": "openai", "base_url": fake.url, "api_key": API_KEY, "max_retries": MAX_RETRIES,
            "timeout_s": TIMEOUT_S}  # fmt: skip
    return {**role, "model": "fake-gpt", "roles": {"cheap": {**role, "model": "fake-mini"}}}


async def chaos_gateway(make_gateway: GatewayFactory, fake: FakeOpenAI) -> Gateway:
    # The stages run when a test says, not on their triggers: no writer run on turns or idleness,
    # no night, no compaction by size.
    background = {"writer": {"turn_threshold": 1000, "idle_seconds": 3600}, "sleep": {"enabled": False}}
    sessions = {"compact_after_tokens": 0, "compact_keep_turns": 1}
    memory = {"filter_tier": {"deadline_ms": 300}}
    return await make_gateway(llm=chaos_llm(fake), background=background, bus=FAST_BUS, sessions=sessions,
                              memory=memory)  # fmt: skip


_ACCOUNTS = count()


@dataclass
class Person:
    """One run's person: the gateway, their tree, their session."""

    gw: Gateway
    fake: FakeOpenAI
    uid: str
    sid: str
    slug: str
    store: Any
    files: dict[str, str] = field(default_factory=dict)


async def person(gw: Gateway, fake: FakeOpenAI) -> Person:
    account = f"ada{next(_ACCOUNTS)}"
    for text in TURNS:
        await gw.handle_inbound(message(text, account=account, name="Ada"))
    await gw.settle()  # the turns' own writes (the session log) land before the run's "before"
    uid = gw.identities.lookup("websocket", account)
    assert uid is not None
    session = gw.state.sessions.open_in(f"user:{uid}")
    assert session is not None
    store = jobscope.store(gw, jobscope.for_user(gw, uid))
    slug = f"websocket-{account}"
    files = seed_files(slug)
    for rel, text in files.items():
        store.write(rel, text, source="test")
    body = "\n".join(WORKING_LINES)
    working.write(store, body, now=datetime.now(UTC), ttl_days=14, source="test")
    files[working.FILE] = store.read(working.FILE)
    fake.scripts.clear()  # answers queued for the next stage only
    fake.requests.clear()
    return Person(gw=gw, fake=fake, uid=uid, sid=session.session_id, slug=slug, store=store, files=files)


def tree(store: Any) -> dict[str, str]:
    """The person's Markdown files (not the audit's pre-run copies)."""
    return {e.path: store.read(e.path) for e in store.files()
            if e.path.endswith(".md") and not e.path.startswith("_history/")}  # fmt: skip


_VOLATILE = re.compile(r"^(Updated|Expires):|^<!-- kith:")


def lines(text: str) -> set[str]:
    return {norm(ln.lstrip("-*+ ")) for ln in text.splitlines() if ln.strip() and not _VOLATILE.match(ln)}


def run_ids(store: Any, rel: str) -> list[str]:
    return [str(r["run_id"]) for r in audit.read_records(store, rel) if r.get("type") == "run" and r.get("written")]


def lost_lines(store: Any, before: dict[str, str], runs_before: dict[str, list[str]]) -> list[str]:
    """Problems: lines gone from a file without a run that can give them back. Undoes the runs."""
    problems: list[str] = []
    for rel, text in before.items():
        now = store.read(rel) if store.exists(rel) else ""
        gone = lines(text) - lines(now)
        if not gone:
            continue
        runs = [r for r in run_ids(store, rel) if r not in runs_before.get(rel, [])]
        if not runs:
            problems.append(f"{rel}: {len(gone)} line(s) lost with no audited run, e.g. {sorted(gone)[0][:60]!r}")
            continue
        for run_id in reversed(runs):
            rollback(store, run_id, rel=rel, force=True)
        if (store.read(rel) if store.exists(rel) else "") != text:
            problems.append(f"{rel}: undoing runs {runs} did not give the file back")
    return problems


def injected_in(store: Any) -> list[str]:
    return [rel for rel, text in tree(store).items() if INJECTED in text]
